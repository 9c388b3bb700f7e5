"""Mixing back-translated pairs with real ones."""

import pytest

from keras_transformer import cli
from keras_transformer.data import backtranslation


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


@pytest.fixture
def files(tmp_path):
    return {
        "synthetic": write(tmp_path / "s.en", ["one", "", "three\rstill three"]),
        "mono": write(tmp_path / "m.de", ["eins", "zwei", "drei"]),
        "real_en": write(tmp_path / "r.en", ["four"]),
        "real_de": write(tmp_path / "r.de", ["vier"]),
    }


def test_synthetic_first_tagged_then_real_and_empty_sides_dropped(files, tmp_path):
    out_en, out_de = str(tmp_path / "x.en"), str(tmp_path / "x.de")
    counts = backtranslation.mix(files["synthetic"], files["mono"], files["real_en"], files["real_de"], out_en,
                                 out_de, tag="<BT>")
    assert counts == {"synthetic": 2, "real": 1, "skipped_empty": 1}
    assert open(out_en, encoding="utf-8", newline="").read() == "<BT> one\n<BT> three\rstill three\nfour\n"
    assert open(out_de, encoding="utf-8").read() == "eins\ndrei\nvier\n"
    backtranslation.mix(files["synthetic"], files["mono"], files["real_en"], files["real_de"], out_en, out_de)
    assert open(out_en, encoding="utf-8", newline="").read().split("\n")[0] == "one"  # untagged


def test_misaligned_files_and_bad_flags_are_named(files, tmp_path, capsys):
    short = write(tmp_path / "short.de", ["eins"])
    with pytest.raises(ValueError, match=r"s\.en' has 3 lines but .*short\.de' has 1; they must be line-aligned"):
        backtranslation.mix(files["synthetic"], short, files["real_en"], files["real_de"], "a", "b")
    real = f"{files['real_en']},{files['real_de']}"
    for flags, message in ((["--synthetic", files["synthetic"]], "--synthetic takes SOURCES,TARGETS"),
                           (["--synthetic", f"{files['synthetic']},{files['mono']}", "--tag", "B T"],
                            "--tag must be one word without spaces; got 'B T'")):
        with pytest.raises(SystemExit) as exit_info:
            cli.mix_backtranslation_main([*flags, "--real", real, "--output", "a,b"])
        assert exit_info.value.code == 2 and message in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        cli.mix_backtranslation_main(["--synthetic", f"{files['synthetic']},{short}", "--real", real,
                                      "--output", f"{tmp_path}/a,{tmp_path}/b"])
    assert exit_info.value.code == 1 and "must be line-aligned" in capsys.readouterr().err
