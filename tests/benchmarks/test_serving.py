import pytest

from keras_transformer.benchmarks import serving
from tests.conftest import run_entry_point, write_tsv


def test_every_engine_is_timed_on_the_same_sentences_and_the_ratios_follow(trained_tiny_run, small_corpus, tmp_path):
    _, test = small_corpus
    corpus = write_tsv(tmp_path / "test.tsv", test[:6])
    lines = []
    figures = serving.serving_figures(trained_tiny_run, corpus, limit=5, batch_size=2, rounds=1, report=lines.append)
    engines = ("SavedModel", "Translator", "CTranslate2 float32", "CTranslate2 int8", "CTranslate2 float32 reranked")
    assert all(figures[name]["batch1_ms"] > 0 and figures[name]["batched_per_s"] > 0 for name in engines)
    reference = figures["CTranslate2 float32"]
    for name in ("SavedModel", "Translator"):
        ratios = figures[f"{name} / CTranslate2 float32"]
        assert ratios["batch1"] == pytest.approx(reference["batch1_ms"] / figures[name]["batch1_ms"])
        assert ratios["batched"] == pytest.approx(figures[name]["batched_per_s"] / reference["batched_per_s"])
    assert "5 sentences of " + corpus in lines[0] and "beam 4" in lines[0]
    # The SavedModel and Translator run one search: same translations. This run ends its sentences on EOS
    # well before the length limit, so CTranslate2 float32 agrees too.
    assert figures["Translator = SavedModel"] == figures["CTranslate2 float32 = SavedModel"] == 5
    assert figures["CTranslate2 float32 reranked = SavedModel"] == 5
    assert "  Translator translates 5/5 sentences as the SavedModel does" in lines
    int8 = figures["SavedModel / CTranslate2 int8"]
    assert int8["batched"] == pytest.approx(figures["SavedModel"]["batched_per_s"]
                                            / figures["CTranslate2 int8"]["batched_per_s"])
    assert len(lines) == 1 + len(engines) + (len(engines) - 1) + 3


def test_a_baseline_runs_saved_model_takes_its_turns_on_the_same_sentences(trained_tiny_run, small_corpus,
                                                                           tmp_path, capsys):
    """`benchmark.py --serving RUN --serving-baseline OTHER`: the record holds both models' figures and depths."""
    import json

    from keras_transformer import cli

    _, test = small_corpus
    corpus = write_tsv(tmp_path / "test.tsv", test[:4])
    code, out, err = run_entry_point(cli.benchmark_main, [
        "--serving", trained_tiny_run, "--serving-baseline", trained_tiny_run, "--corpus", corpus,
        "--serving-sentences", "4", "--engines-batch", "2", "--serving-rounds", "1",
        "--record", str(tmp_path / "records")], capsys)
    assert code == 0, err
    (path,) = (tmp_path / "records").iterdir()
    record = json.loads(path.read_text())
    figures = record["figures"]
    assert record["kind"] == "serving" and record["corpus"] == {"dataset": corpus, "split": None, "sentences": 4,
                                                                "model_dir": trained_tiny_run}
    assert figures["baseline"] == trained_tiny_run and "stand_in_updates" not in figures
    baseline = figures[serving.BASELINE]
    assert figures[f"{serving.BASELINE} = SavedModel"] == 4  # the same weights: the same translations
    ratio = figures[f"SavedModel / {serving.BASELINE}"]
    assert ratio["batch1"] == pytest.approx(baseline["batch1_ms"] / figures["SavedModel"]["batch1_ms"])
    assert ratio["batched"] == pytest.approx(figures["SavedModel"]["batched_per_s"] / baseline["batched_per_s"])
    assert out.splitlines()[0] == f"serving: baseline {trained_tiny_run} (2+2 layers)"
    assert figures["layers"] == figures["baseline_layers"] == [2, 2]  # what the record names


def test_the_sentences_are_the_first_column_of_the_corpus(tmp_path):
    path = tmp_path / "c.tsv"
    path.write_text("a b\tx\n\ty\nc d\tz\ne\tw\n", encoding="utf-8")
    assert serving.read_sentences(str(path), 2) == ["a b", "c d"]
    empty = tmp_path / "empty.tsv"
    empty.write_text("\tx\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no sentences to translate"):
        serving.read_sentences(str(empty), 5)


def test_the_serving_flags_are_checked(capsys, tmp_path):
    from keras_transformer import cli

    code, _, err = run_entry_point(cli.benchmark_main, ["--serving", str(tmp_path), "--serving-sentences", "0"],
                                   capsys)
    assert code == 2 and "--serving-sentences must be at least 1; got 0" in err
    code, _, err = run_entry_point(cli.benchmark_main, ["--serving", str(tmp_path / "nowhere")], capsys)
    assert code == 1 and "run_config.json" in err


@pytest.mark.slow
def test_without_the_main_job_its_first_updates_are_trained_and_served(capsys, tmp_path, monkeypatch):
    from keras_transformer import cli
    from keras_transformer.modeling.precision import resolve_precision

    monkeypatch.chdir(tmp_path)  # no runs/numerals_en_de-small here
    code, out, err = run_entry_point(cli.benchmark_main, ["--serving", "--serving-sentences", "2", "--serving-rounds",
                                                          "1", "--serving-quick-steps", "1", "--engines-batch", "2"],
                                     capsys)
    assert code == 0, err
    lines = out.splitlines()
    notice, header = [line for line in lines if line.startswith("serving: ")]  # training prints between them
    assert notice.startswith("serving: no run in runs/numerals_en_de-small ") and "its first 1 updates in " in notice
    # The stand-in is the main job's model (small preset, its precision), served on its own test split.
    assert f"(small, 3+3 layers, {resolve_precision('auto')}), 2 sentences of its test split" in header
    assert "  Translator translates 2/2 sentences as the SavedModel does" in lines
    assert "SavedModel / CTranslate2 float32" in out
    assert list(tmp_path.iterdir()) == []  # trained in a temporary directory, nothing left behind
