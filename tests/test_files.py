import os

import pytest

from keras_transformer.files import atomic_open, atomic_path


def test_the_file_is_replaced_whole_when_the_block_ends(tmp_path):
    path = str(tmp_path / "state.json")
    with atomic_open(path) as f:
        f.write('{"a": "ä"}\n')
    assert open(path, encoding="utf-8").read() == '{"a": "ä"}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


@pytest.mark.parametrize("mode,old,new", [("w", "old\n", "half of the new"), ("wb", b"old\n", b"half")])
def test_a_block_that_fails_leaves_the_previous_version_and_no_temporary_file(tmp_path, mode, old, new):
    path = tmp_path / "state"
    (path.write_bytes if isinstance(old, bytes) else path.write_text)(old)
    with pytest.raises(RuntimeError, match="killed"):
        with atomic_open(str(path), mode) as f:
            f.write(new)
            raise RuntimeError("killed mid-write")
    assert (path.read_bytes() if isinstance(old, bytes) else path.read_text()) == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]


def test_bytes_and_path_writers(tmp_path):
    with atomic_open(str(tmp_path / "model.bin"), "wb") as f:
        f.write(b"\x00\xff")
    assert (tmp_path / "model.bin").read_bytes() == b"\x00\xff"
    # A writer that insists on a suffix (Keras' .weights.h5) gets a temporary path that keeps it.
    with atomic_path(str(tmp_path / "best.weights.h5")) as tmp:
        assert tmp.endswith(".weights.h5") and os.path.dirname(tmp) == str(tmp_path)
        open(tmp, "wb").write(b"w")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.weights.h5", "model.bin"]
    with pytest.raises(ValueError, match="mode must be 'w' or 'wb'"):
        with atomic_open(str(tmp_path / "x"), "a"):
            pass
