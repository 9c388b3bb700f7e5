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


def test_the_held_out_pairs_are_the_real_corpus_drawn_ones(tmp_path, capsys):
    """With --held-out, the mix's validation and test files are the pairs a run on the real corpus holds out,
    which are the reverse run's (on TARGET,SOURCE) swapped, with no synthetic pair among them."""
    from keras_transformer.data.local_corpus import LocalCorpus

    real = [(f"source {i} words", f"Ziel {i} Wörter") for i in range(400)]
    real_en, real_de = write(tmp_path / "r.en", [s for s, _ in real]), write(tmp_path / "r.de", [t for _, t in real])
    synthetic = write(tmp_path / "s.en", ["source 3 words", "other"])  # a synthetic copy of a real source
    mono = write(tmp_path / "m.de", ["Ziel 3 Wörter", "anders"])
    prefix = str(tmp_path / "real")
    code = cli.mix_backtranslation_main(["--synthetic", f"{synthetic},{mono}", "--real", f"{real_en},{real_de}",
                                         "--output", f"{tmp_path}/x.en,{tmp_path}/x.de", "--tag",
                                         "--held-out", prefix])
    out = capsys.readouterr().out
    assert code == 0 and f"10 validation pairs in {prefix}.validation.tsv, 10 test pairs in {prefix}.test.tsv" in out
    reverse_run = LocalCorpus(f"{real_de},{real_en}")
    for split in ("validation", "test"):
        written = [tuple(line.split("\t")) for line in open(f"{prefix}.{split}.tsv", encoding="utf-8").read()
                   .splitlines()]
        assert written == [(s, t) for t, s in reverse_run.split(split)]
        assert len(written) == 10 and set(written) <= set(real)  # 2.5% of 400
