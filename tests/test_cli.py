"""The scripts, run as a user runs them, on a tiny model directory."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest
import sacrebleu

from keras_transformer import attention_plot, export

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SENTENCES = ["It is half past seven.", "three hundred twenty-one", ""]


def script(name, *args, stdin=None):
    result = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", f"{name}.py"), *args], input=stdin,
                            capture_output=True, text=True, timeout=600,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    return result


def test_translate_reads_stdin_or_a_file_from_a_model_dir_or_a_saved_model(tiny_run_dir, translator, tmp_path):
    expected, _ = translator.translate(SENTENCES, progress=False)
    from_dir = script("translate", "--model", tiny_run_dir, stdin="\n".join(SENTENCES) + "\n")
    assert from_dir.returncode == 0, from_dir.stderr[-2000:]
    assert from_dir.stdout.split("\n")[:3] == expected
    base = str(tmp_path / "saved")
    export.export_translator(translator, base)
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
    from keras_transformer import evaluation
    from keras_transformer.config import RunConfig

    _, references = evaluation.read_split(RunConfig.load(tiny_run_dir), "validation")
    hypotheses = open(output, encoding="utf-8").read().split("\n")[:-1]
    assert len(hypotheses) == len(references) == 17
    bleu = sacrebleu.corpus_bleu(hypotheses, [references])
    chrf = sacrebleu.corpus_chrf(hypotheses, [references])
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"sacreBLEU {bleu.score:.2f}  (nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert lines[1].startswith(f"chrF      {chrf.score:.2f}  (")
    assert lines[2] == f"hypotheses: {output}"


def test_export_script_writes_the_next_version(tiny_run_dir, tmp_path):
    base = str(tmp_path / "m")
    for version in ("1", "2"):
        result = script("export", "--model-dir", tiny_run_dir, "--output", base)
        assert result.returncode == 0, result.stderr[-2000:]
        assert result.stdout.strip() == os.path.join(base, version)
    missing = script("export", "--model-dir", str(tmp_path / "nothing"), "--output", base)
    assert missing.returncode == 1 and "run_config.json" in missing.stderr


def test_plot_attention_writes_one_png_per_layer(tiny_run_dir, tmp_path):
    result = script("plot_attention", "--model-dir", tiny_run_dir, "--sentence", SENTENCES[0],
                    "--output-dir", str(tmp_path / "att"))
    assert result.returncode == 0, result.stderr[-2000:]
    paths = result.stdout.split()
    assert [os.path.basename(p) for p in paths] == ["layer_0.png", "layer_1.png"]
    for path in paths:
        with open(path, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_attention_weights_are_distributions_over_real_source_pieces(translator):
    source, output, layers = attention_plot.cross_attention(translator, SENTENCES[0])
    assert source[-1] == "</s>" and output and len(layers) == 2
    for weights in layers:
        assert weights.shape == (4, len(output), len(source))
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("name", ["train", "translate", "evaluate", "export", "average_checkpoints", "benchmark",
                                  "plot_attention"])
def test_every_script_explains_its_flags(name):
    result = script(name, "--help")
    assert result.returncode == 0 and "usage:" in result.stdout
    flags = [w for w in result.stdout.split() if w.startswith("--") and w != "--help"]
    assert flags
    # Every flag's entry in the options list has text after it.
    options = result.stdout.split("options:")[1]
    for flag in set(f.rstrip(",") for f in flags):
        entry = options.split(flag, 1)[1].split("\n  --", 1)[0]
        assert len(entry.split()) >= 2, f"{name}: {flag} has no help"


def test_inspect_data_prints_a_summary_and_bad_datasets_exit_with_a_message(small_corpus, tmp_path):
    from tests.conftest import write_tsv

    train, _ = small_corpus
    path = write_tsv(tmp_path / "c.tsv", train[:300])
    with open(path, "a", encoding="utf-8") as f:
        f.write("no tab on this line\n")
    result = script("train", "--dataset", path, "--inspect-data", "--vocab-size", "400",
                    "--model-dir", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "dataset:                " + path + " (train)" in result.stdout
    assert "pairs read:             285" in result.stdout  # 15 of 301 lines held out, 1 without a TAB
    kept = int(re.search(r"^pairs kept: +(\d+)$", result.stdout, re.M).group(1))
    assert re.search(rf"^batches: +\d+ \({kept} pairs\)$", result.stdout, re.M)  # every kept pair is batched
    assert "  no TAB: 1" in result.stdout and "padding efficiency:" in result.stdout
    assert "distinct batch shapes:" in result.stdout
    # Inspection wrote that folder's vocabulary, so it cannot become another run's.
    other = script("train", "--dataset", path, "--vocab-size", "500", "--model-dir", str(tmp_path / "run"))
    assert other.returncode == 1 and "(--vocab-size 400 -> 500)" in other.stderr, other.stderr[-2000:]
    missing = script("train", "--dataset", str(tmp_path / "missing.tsv"), "--model-dir", str(tmp_path / "r2"))
    assert missing.returncode == 1 and "missing.tsv' does not exist" in missing.stderr
    unknown = script("train", "--dataset", "no_such_corpus_xyz", "--model-dir", str(tmp_path / "r3"))
    assert unknown.returncode == 1 and "Unknown dataset 'no_such_corpus_xyz'" in unknown.stderr


def test_benchmark_figures_are_consistent(small_corpus, tmp_path):
    from keras_transformer import benchmark
    from tests.conftest import write_tsv

    train, _ = small_corpus
    corpus = write_tsv(tmp_path / "c.tsv", train[:400])
    lines = []
    figures = benchmark.run_benchmark(preset="tiny", vocab_size=300, batch_tokens=256, length=16, train_steps=1,
                                      decode_batch=2, output_length=6, corpus=corpus, engines_batch=4,
                                      report=lines.append)
    assert figures["decode_cached_vs_uncached"] == pytest.approx(
        figures["decode_cached_sentences_per_s"] / figures["decode_uncached_sentences_per_s"])
    assert figures["float32_vs_keras_hub"] == pytest.approx(
        figures["train_float32_tokens_per_s"] / figures["train_keras_hub_float32_tokens_per_s"])
    assert 0 < figures["naive_padding_efficiency"] < figures["padding_efficiency"] <= 1
    assert len(lines) == 13 and lines[7].startswith("5. padding efficiency")
    best = max(figures["decode_ours_float32_tokens_per_s"], figures["decode_ours_mixed_bfloat16_tokens_per_s"])
    assert figures["ours_best_vs_ctranslate2_float32"] == pytest.approx(
        best / figures["decode_ctranslate2_float32_tokens_per_s"])
    assert figures["ctranslate2_int8_vs_float32"] == pytest.approx(
        figures["decode_ctranslate2_int8_tokens_per_s"] / figures["decode_ctranslate2_float32_tokens_per_s"])
