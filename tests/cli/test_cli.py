"""The scripts, run as a user runs them, on a tiny model directory."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest
import sacrebleu

from keras_transformer.decoding import restore
from keras_transformer.export import saved_model
from keras_transformer.run_dir import RunDir
from tests.conftest import ROOT, load_config, run_entry_point

SENTENCES = ["It is half past seven.", "three hundred twenty-one", ""]


def script(name, *args, stdin=None):
    result = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", f"{name}.py"), *args], input=stdin,
                            capture_output=True, text=True, timeout=600,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    return result


@pytest.mark.slow
def test_translate_reads_stdin_or_a_file_from_a_model_dir_or_a_saved_model(tiny_run_dir, translator, tmp_path):
    expected = translator.translate(SENTENCES, progress=False).best
    from_dir = script("translate", "--model", tiny_run_dir, stdin="\n".join(SENTENCES) + "\n")
    assert from_dir.returncode == 0, from_dir.stderr[-2000:]
    assert from_dir.stdout.split("\n")[:3] == expected
    base = str(tmp_path / "saved")
    saved_model.export_translator(translator, base)
    (tmp_path / "in.txt").write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    from_export = script("translate", "--model", base, "--input", str(tmp_path / "in.txt"), "--batch-size", "2")
    assert from_export.returncode == 0, from_export.stderr[-2000:]
    assert from_export.stdout.split("\n")[:3] == expected
    refused = script("translate", "--model", base, "--beam-size", "2", stdin="x\n")
    assert refused.returncode == 1 and "fixed at export" in refused.stderr


def test_evaluate_prints_sacrebleu_of_the_written_hypotheses(tiny_run_dir, tmp_path):
    output = str(tmp_path / "hyp.txt")
    result = script("evaluate", "--model-dir", tiny_run_dir, "--split", "validation", "--beam-size", "1",
                    "--output", output)
    assert result.returncode == 0, result.stderr[-2000:]
    from keras_transformer.data import sources

    _, references = sources.read_split(load_config(tiny_run_dir).data, "validation")
    hypotheses = open(output, encoding="utf-8").read().split("\n")[:-1]
    assert len(hypotheses) == len(references) == 8  # 2.5% of the 340 pairs
    bleu = sacrebleu.corpus_bleu(hypotheses, [references])
    chrf = sacrebleu.corpus_chrf(hypotheses, [references])
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"sacreBLEU {bleu.score:.2f}  (nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert lines[1].startswith(f"chrF      {chrf.score:.2f}  (")
    assert lines[2] == f"hypotheses: {output}"


@pytest.mark.slow
def test_export_script_writes_the_next_version(tiny_run_dir, tmp_path):
    """Each export is a new version beside the last, recording the decoding flags it was given (else the
    run's) and the package version."""
    import keras_transformer
    from keras_transformer.export import settings

    base = str(tmp_path / "m")
    for version, flags, (beam, alpha) in (("1", [], (4, 0.6)), ("2", ["--beam-size", "2", "--alpha", "1.0"], (2, 1.0))):
        result = script("export", "--model-dir", tiny_run_dir, "--output", base, *flags)
        assert result.returncode == 0, result.stderr[-2000:]
        assert result.stdout.strip() == os.path.join(base, version)
        recorded = settings.read_settings(os.path.join(base, version, "assets"))
        assert (recorded["beam_size"], recorded["alpha"]) == (beam, alpha)
        assert recorded["keras_transformer_version"] == keras_transformer.__version__
    missing = script("export", "--model-dir", str(tmp_path / "nothing"), "--output", base)
    assert missing.returncode == 1 and "run_config.json" in missing.stderr


@pytest.mark.slow
def test_plot_attention_writes_one_png_per_layer(tiny_run_dir, tmp_path):
    result = script("plot_attention", "--model-dir", tiny_run_dir, "--sentence", SENTENCES[0],
                    "--output-dir", str(tmp_path / "att"))
    assert result.returncode == 0, result.stderr[-2000:]
    paths = result.stdout.split()
    assert [os.path.basename(p) for p in paths] == ["layer_0.png", "layer_1.png"]
    for path in paths:
        with open(path, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("name", ["train", "translate", "evaluate", "export", "average_checkpoints", "benchmark",
                                  "plot_attention"])
def test_every_script_explains_its_flags(name):
    result = script(name, "--help")
    assert result.returncode == 0 and "usage:" in result.stdout
    flags = [w for w in result.stdout.split() if w.startswith("--") and w != "--help"]
    assert flags
    # Every flag's entry in the options list has text after it.
    options = result.stdout.split("options:")[1]
    for flag in set(f.rstrip("],") for f in flags):  # "[--x | --no-x]" in the usage line
        entry = options.split(flag, 1)[1].split("\n  --", 1)[0]
        assert len(entry.split()) >= 2, f"{name}: {flag} has no help"


@pytest.mark.slow
def test_inspect_data_prints_a_summary_and_bad_datasets_exit_with_a_message(small_corpus, tmp_path, tiny_run_dir):
    from tests.conftest import write_tsv

    train, _ = small_corpus
    path = write_tsv(tmp_path / "c.tsv", train[:300])
    with open(path, "a", encoding="utf-8") as f:
        f.write("no tab on this line\n")
    result = script("train", "--dataset", path, "--inspect-data", "--vocab-size", "400",
                    "--model-dir", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "dataset:                " + path + " (train)" in result.stdout
    assert "pairs read:             286" in result.stdout  # 7 + 7 of 300 pairs held out (2.5% each)
    kept = int(re.search(r"^pairs kept: +(\d+)$", result.stdout, re.M).group(1))
    assert re.search(rf"^batches: +\d+ \({kept} pairs\)$", result.stdout, re.M)  # every kept pair is batched
    assert "  no TAB: 1" in result.stdout and "padding efficiency:" in result.stdout
    assert "distinct batch shapes:" in result.stdout
    # It keeps the vocabulary it trained for the run to come, and records no run, so any training may follow.
    assert os.path.exists(tmp_path / "run" / "sentencepiece.model")
    assert not os.path.exists(tmp_path / "run" / "run_config.json")
    # Pointed at a recorded run, it inspects with that run's vocabulary and never trains over it.
    import shutil

    recorded = shutil.copytree(tiny_run_dir, tmp_path / "recorded")
    vocabulary = (recorded / "sentencepiece.model").read_bytes()
    config = load_config(str(recorded))
    inspected = script("train", "--dataset", config.dataset, "--inspect-data", "--model-dir", str(recorded))
    assert inspected.returncode == 0, inspected.stderr[-2000:]
    assert (recorded / "sentencepiece.model").read_bytes() == vocabulary
    assert re.search(rf"^vocabulary size: +{config.vocab_size}$", inspected.stdout, re.M)
    missing = script("train", "--dataset", str(tmp_path / "missing.tsv"), "--model-dir", str(tmp_path / "r2"))
    assert missing.returncode == 1 and "missing.tsv' does not exist" in missing.stderr
    unknown = script("train", "--dataset", "no_such_corpus_xyz", "--model-dir", str(tmp_path / "r3"))
    assert unknown.returncode == 1 and "Unknown dataset 'no_such_corpus_xyz'" in unknown.stderr


@pytest.mark.slow
def test_benchmark_figures_are_consistent(small_corpus, tmp_path, capsys):
    """`benchmark.py`'s speed mode at a tiny scale: the ratios it records are those of its figures."""
    import json

    from keras_transformer import cli
    from tests.conftest import write_tsv

    train, _ = small_corpus
    corpus = write_tsv(tmp_path / "c.tsv", train[:400])
    code, out, err = run_entry_point(cli.benchmark_main, [
        "--preset", "tiny", "--vocab-size", "300", "--batch-tokens", "256", "--length", "16", "--train-steps", "1",
        "--decode-batch", "2", "--output-length", "6", "--corpus", corpus, "--engines-batch", "4",
        "--record", str(tmp_path / "records")], capsys)
    assert code == 0, err
    (path,) = (tmp_path / "records").iterdir()
    record = json.loads(path.read_text())
    figures = record["figures"]
    assert record["kind"] == "speed" and figures["preset"] == "tiny" and record["corpus"]["padding_corpus"] == corpus
    assert figures["decode_cached_vs_uncached"] == pytest.approx(
        figures["decode_cached_sentences_per_s"] / figures["decode_uncached_sentences_per_s"])
    assert figures["float32_vs_keras_hub"] == pytest.approx(
        figures["train_float32_tokens_per_s"] / figures["train_keras_hub_float32_tokens_per_s"])
    assert 0 < figures["naive_padding_efficiency"] < figures["padding_efficiency"] <= 1
    lines = [line for line in out.splitlines() if re.match(r"^\d\. ", line)]
    assert [line[:2] for line in lines] == ["1.", "2.", "2.", "2.", "3.", "4.", "5."] + ["6."] * 5
    assert lines[6].startswith("5. padding efficiency") and f"Record written to {path}" in out
    best = max(figures["decode_ours_float32_tokens_per_s"], figures["decode_ours_mixed_bfloat16_tokens_per_s"])
    assert figures["ours_best_vs_ctranslate2_float32"] == pytest.approx(
        best / figures["decode_ctranslate2_float32_tokens_per_s"])
    assert figures["ctranslate2_int8_vs_float32"] == pytest.approx(
        figures["decode_ctranslate2_int8_tokens_per_s"] / figures["decode_ctranslate2_float32_tokens_per_s"])


# ------------------------------------------------------------------ decoding for data work
NBEST_SENTENCES = ["It is half past seven.", "", "three hundred twenty-one"]


def test_translate_n_best_writes_ranked_tsv(tiny_run_dir, capsys, monkeypatch):
    from keras_transformer import cli

    config, model, tokenizer = restore.restore(tiny_run_dir)
    expected, expected_scores = restore.make_translator(config.decoding, model, tokenizer, n_best=3).translate(
        NBEST_SENTENCES, progress=False)
    code, out, err = run_entry_point(cli.translate_main, ["--model", tiny_run_dir, "--n-best", "3"], capsys,
                              "\n".join(NBEST_SENTENCES) + "\n", monkeypatch)
    assert code == 0, err
    rows = [line.split("\t") for line in out.split("\n")[:-1]]  # not splitlines(): outputs may hold \x1e
    assert [(int(r[0]), int(r[1])) for r in rows] == [(i, k) for i in range(3) for k in range(3)]
    for index, rank, score, text in rows:
        assert text == expected[int(index)][int(rank)]
        assert float(score) == pytest.approx(expected_scores[int(index)][int(rank)], abs=1e-5)
    for i in (0, 2):
        assert [float(r[2]) for r in rows if r[0] == str(i)] == sorted((float(r[2]) for r in rows if r[0] == str(i)),
                                                                       reverse=True)
    assert [r[3] for r in rows if r[0] == "1"] == ["", "", ""]  # a blank line: "" at every rank, score 0
    code, _, err = run_entry_point(cli.translate_main, ["--model", tiny_run_dir, "--n-best", "5"], capsys, "x\n",
                            monkeypatch)
    assert code == 1 and "n_best must be in [1, beam_size=4]; got 5" in err


@pytest.mark.slow
def test_translate_sampling_is_seeded_and_cold_sampling_is_greedy(tiny_run_dir, capsys, monkeypatch):
    from keras_transformer import cli

    text = "\n".join(NBEST_SENTENCES * 3) + "\n"

    def translate(*flags):
        code, out, err = run_entry_point(cli.translate_main, ["--model", tiny_run_dir, *flags], capsys, text, monkeypatch)
        assert code == 0, err
        return out

    first = translate("--sampling-topk", "0", "--seed", "3")
    assert translate("--sampling-topk", "0", "--seed", "3") == first
    assert translate("--sampling-topk", "0", "--seed", "4") != first
    assert first.split("\n")[1] == ""  # blank in, blank out
    greedy = translate("--beam-size", "1", "--alpha", "0")
    assert translate("--sampling-temperature", "0.0001", "--seed", "8") == greedy
    assert translate("--sampling-topk", "1", "--seed", "8") == greedy


@pytest.mark.parametrize("flags,message", [
    (["--sampling-topk", "-1"], "--sampling-topk must be a whole number >= 0 (0: the full distribution); got -1"),
    (["--sampling-topp", "0"], "--sampling-topp must be in (0, 1]; got 0.0"),
    (["--sampling-topp", "1.5"], "--sampling-topp must be in (0, 1]; got 1.5"),
    (["--sampling-temperature", "-1"], "--sampling-temperature must be > 0; got -1.0"),
    (["--sampling-topk", "5", "--n-best", "2"], "--n-best applies to beam search"),
    (["--n-best", "0"], "--n-best must be at least 1; got 0"),
])
def test_bad_decoding_flags_name_the_value_and_range(tiny_run_dir, capsys, monkeypatch, flags, message):
    from keras_transformer import cli

    code, _, err = run_entry_point(cli.translate_main, ["--model", tiny_run_dir, *flags], capsys, "x\n", monkeypatch)
    assert code == 2 and message in err


def test_ensembles_of_one_vocabulary_only(tiny_run_dir, tmp_path, capsys, monkeypatch, small_corpus):
    import shutil

    from keras_transformer import cli
    from keras_transformer.data.tokenizer import train_sentencepiece

    alone = run_entry_point(cli.translate_main, ["--model", tiny_run_dir], capsys, "\n".join(NBEST_SENTENCES) + "\n",
                     monkeypatch)
    twice = run_entry_point(cli.translate_main, ["--model", tiny_run_dir, "--model", tiny_run_dir], capsys,
                     "\n".join(NBEST_SENTENCES) + "\n", monkeypatch)
    assert alone[0] == twice[0] == 0 and twice[1] == alone[1]

    other = tmp_path / "other"
    shutil.copytree(tiny_run_dir, other)
    train, _ = small_corpus
    train_sentencepiece((s for pair in train[:500] for s in pair), 500, RunDir(other).vocabulary_path)
    code, _, err = run_entry_point(cli.translate_main, ["--model", tiny_run_dir, "--model", str(other)], capsys, "x\n",
                            monkeypatch)
    assert code == 1 and "must share one vocabulary" in err and str(other) in err
    code, _, err = run_entry_point(cli.score_main, ["--model-dir", tiny_run_dir, "--model-dir", str(other), "--input", "-"],
                            capsys, "a\tb\n", monkeypatch)
    assert code == 1 and "must share one vocabulary" in err


def test_score_prints_beam_search_scores_of_its_own_translations(trained_tiny_run, small_corpus, tiny_run_dir,
                                                                 tmp_path, capsys, monkeypatch):
    """score.py on (source, translation) pairs reproduces the scores beam
    search gave them (a trained run, whose outputs re-tokenize to themselves)."""
    import tensorflow as tf

    from keras_transformer import cli

    config, model, tokenizer = restore.restore(trained_tiny_run)
    _, test = small_corpus
    # Inputs the translator does not truncate (scoring never does: it scores what it is given).
    sources = [source for source, _ in test[100:150]
               if len(tokenizer.tokenize(tf.constant([source]))[0]) < config.max_length - 1][:20]
    translations, scores = restore.make_translator(config.decoding, model, tokenizer).translate(sources, progress=False)
    translations, scores = [t[0] for t in translations], scores[:, 0]
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{s}\t{t}\n" for s, t in zip(sources, translations)), encoding="utf-8")
    code, out, err = run_entry_point(cli.score_main, ["--model-dir", trained_tiny_run, "--input", str(pairs),
                                               "--batch-size", "7"], capsys)
    assert code == 0, err
    lines = out.split("\n")[:-1]
    assert lines[0] == "index\tlog_prob\tper_token\tnormalized\tpieces"
    rows = [line.split("\t") for line in lines[1:]]
    assert [int(r[0]) for r in rows] == list(range(20))
    for row, score in zip(rows, scores):
        log_prob, per_token, normalized, pieces = float(row[1]), float(row[2]), float(row[3]), int(row[4])
        assert normalized == pytest.approx(float(score), abs=2e-4)
        assert per_token == pytest.approx(log_prob / pieces, abs=1e-5)
        assert normalized == pytest.approx(log_prob / ((5 + pieces) / 6) ** 0.6, abs=1e-4)

    pairs.write_text("one\tzwei\nno tab here\n", encoding="utf-8")
    code, _, err = run_entry_point(cli.score_main, ["--model-dir", tiny_run_dir, "--input", str(pairs)], capsys)
    assert code == 1 and f"{pairs}:2: expected source<TAB>target; got 1 field(s)." in err


@pytest.mark.slow
def test_exported_n_best_signature_has_a_hypothesis_axis(tiny_run_dir, translator, tmp_path, capsys):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    from keras_transformer import cli

    code, out, err = run_entry_point(cli.export_main, ["--model-dir", tiny_run_dir, "--output", str(tmp_path / "nb"),
                                                "--n-best", "3"], capsys)
    assert code == 0, err
    served = tf.saved_model.load(out.strip()).signatures["serving_default"]
    result = served(sentences=tf.constant(NBEST_SENTENCES))
    assert result["translations"].shape == (3, 3) and result["scores"].shape == (3, 3)
    config, model, tokenizer = restore.restore(tiny_run_dir)
    expected, expected_scores = restore.make_translator(config.decoding, model, tokenizer, n_best=3).translate(
        NBEST_SENTENCES, progress=False)
    assert [[t.decode() for t in row] for row in result["translations"].numpy()] == expected
    np.testing.assert_allclose(result["scores"].numpy(), expected_scores, atol=1e-4)
    code, _, err = run_entry_point(cli.export_main, ["--model-dir", tiny_run_dir, "--output", str(tmp_path / "c"),
                                              "--format", "ctranslate2", "--n-best", "2"], capsys)
    assert code == 2 and "--n-best applies to --format saved_model" in err


def test_precision_is_a_choice_for_training_directories_only(tiny_run_dir, trained_tiny_run, tmp_path, capsys,
                                                             monkeypatch):
    from keras_transformer import cli

    code, _, err = run_entry_point(cli.translate_main, ["--model", tiny_run_dir, "--precision", "fp8"], capsys,
                                   "x\n", monkeypatch)
    assert code == 2 and "invalid choice: 'fp8'" in err
    # The float32 run, restored in float32 explicitly, translates as it does by default.
    default = run_entry_point(cli.translate_main, ["--model", trained_tiny_run], capsys,
                              "\n".join(NBEST_SENTENCES) + "\n", monkeypatch)
    explicit = run_entry_point(cli.translate_main, ["--model", trained_tiny_run, "--precision", "float32"], capsys,
                               "\n".join(NBEST_SENTENCES) + "\n", monkeypatch)
    assert default[0] == explicit[0] == 0 and default[1] == explicit[1]
    code, out, err = run_entry_point(cli.export_main, ["--model-dir", trained_tiny_run, "--output",
                                                       str(tmp_path / "sm"), "--precision", "mixed_bfloat16"], capsys)
    assert code == 0 and "computing in mixed_bfloat16" in err
    code, _, err = run_entry_point(cli.translate_main, ["--model", out.strip(), "--precision", "float32"], capsys,
                                   "x\n", monkeypatch)
    assert code == 1 and "its precision was fixed at export" in err


@pytest.mark.slow
def test_translate_and_evaluate_take_the_decoding_guards(tiny_run_dir, capsys, monkeypatch, tmp_path):
    from keras_transformer import cli

    config, model, tokenizer = restore.restore(tiny_run_dir)
    expected = restore.make_translator(config.decoding, model, tokenizer, no_repeat_ngram_size=1,
                                       repetition_penalty=1.4).translate(SENTENCES, progress=False).best
    code, out, err = run_entry_point(cli.translate_main, ["--model", tiny_run_dir, "--no-repeat-ngram-size", "1",
                                                          "--repetition-penalty", "1.4"], capsys,
                                     "\n".join(SENTENCES) + "\n", monkeypatch)
    assert code == 0, err
    assert out.split("\n")[:len(SENTENCES)] == [t.replace("\r", " ").replace("\n", " ") for t in expected]
    code, out, err = run_entry_point(cli.evaluate_main, ["--model-dir", tiny_run_dir, "--limit", "5",
                                                         "--no-repeat-ngram-size", "1",
                                                         "--output", str(tmp_path / "h.txt")], capsys)
    assert code == 0, err
    from keras_transformer.data import sources

    test_sentences, _ = sources.read_split(config.data, "test", limit=5)
    guarded = restore.make_translator(config.decoding, model, tokenizer, no_repeat_ngram_size=1)
    written = (tmp_path / "h.txt").read_bytes().decode("utf-8").split("\n")[:-1]  # a "\r" stays in its line
    assert written == [t.replace("\n", " ") for t in guarded.translate(test_sentences, progress=False).best]
    code, _, err = run_entry_point(cli.translate_main, ["--model", tiny_run_dir, "--repetition-penalty", "0"],
                                   capsys, "a\n", monkeypatch)
    assert code == 1 and "repetition_penalty must be > 0 (1: off); got 0.0" in err
