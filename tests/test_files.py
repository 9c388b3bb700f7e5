import pytest

from keras_transformer.files import atomic_open


def test_the_file_is_replaced_whole_when_the_block_ends(tmp_path):
    path = str(tmp_path / "state.json")
    with atomic_open(path) as f:
        f.write('{"a": "ä"}\n')
    assert open(path, encoding="utf-8").read() == '{"a": "ä"}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_a_block_that_fails_leaves_the_previous_version(tmp_path):
    path = tmp_path / "state.json"
    path.write_text("old\n", encoding="utf-8")
    with pytest.raises(RuntimeError, match="killed"):
        with atomic_open(str(path)) as f:
            f.write("half of the new")
            raise RuntimeError("killed mid-write")
    assert path.read_text(encoding="utf-8") == "old\n"
