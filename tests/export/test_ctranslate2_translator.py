"""Translating with an exported CTranslate2 directory, from Python and from the scripts."""

import ast
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import keras_transformer
from keras_transformer import cli
from keras_transformer.decoding import restore
from keras_transformer.export import ctranslate2 as ctranslate2_export
from keras_transformer.export import loading
from keras_transformer.export.ctranslate2_translator import CTranslate2Translator, is_ctranslate2_model
from tests.conftest import load_config, run_entry_point
from tests.helpers.docs import bash, docs_block, docs_command, make_checkout


@pytest.fixture(scope="module")
def trained_run(trained_tiny_run):
    return trained_tiny_run


@pytest.fixture(scope="module")
def sentences(small_corpus):
    _, test = small_corpus
    return [source for source, _ in test[40:100]]


def test_scripts_export_then_translate_like_the_run_at_alpha_0(trained_run, sentences, tmp_path, capsys):
    """export.py --format ctranslate2 then translate.py --model DIR prints,
    line for line, what translate.py prints for the training directory
    (beam 4, alpha 0; float32 weights), blank lines included."""
    output = str(tmp_path / "ct2")
    code, out, _ = run_entry_point(cli.export_main, ["--model-dir", trained_run, "--format", "ctranslate2",
                                             "--output", output, "--quantization", "float32"], capsys)
    assert code == 0 and out.strip() == output and is_ctranslate2_model(output)
    assert sorted(os.listdir(output)) == ["config.json", "keras_transformer.json", "model.bin",
                                          "sentencepiece.model", "shared_vocabulary.json"]
    with open(os.path.join(trained_run, "sentencepiece.model"), "rb") as a, \
            open(os.path.join(output, "sentencepiece.model"), "rb") as b:
        assert a.read() == b.read()

    lines = sentences + ["", "   "]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    _, ours, _ = run_entry_point(cli.translate_main, ["--model", trained_run, "--alpha", "0", "--input",
                                              str(tmp_path / "in.txt")], capsys)
    code, theirs, _ = run_entry_point(cli.translate_main, ["--model", output, "--alpha", "0", "--threads", "1",
                                                   "--input", str(tmp_path / "in.txt")], capsys)
    assert code == 0
    assert theirs.split("\n") == ours.split("\n")
    assert len(ours.split("\n")) == len(lines) + 1 and ours.split("\n")[-3:] == ["", "", ""]
    assert len(set(ours.split("\n"))) >= 5  # varied translations, not one repeated string


def test_settings_of_the_run_are_the_defaults(trained_run, tmp_path):
    config = load_config(trained_run)
    _, model, tokenizer = restore.restore(trained_run)
    translator = restore.make_translator(config.decoding, model, tokenizer)
    path = ctranslate2_export.export_translator_ctranslate2(translator, str(tmp_path / "ct2"), "int8")
    settings = json.load(open(os.path.join(path, "keras_transformer.json")))
    assert settings == {"alpha": 0.6, "beam_size": 4, "extra_length": 50, "max_input_length": 32,
                        "max_positions": 1024, "quantization": "int8", "no_repeat_ngram_size": 0,
                        "repetition_penalty": 1.0, "keras_transformer_version": keras_transformer.__version__}
    loaded = CTranslate2Translator(path)
    assert (loaded.beam_size, loaded.alpha, loaded.max_input_length) == (4, 0.6, 32)
    assert (loaded.no_repeat_ngram_size, loaded.repetition_penalty) == (0, 1.0)
    overridden = CTranslate2Translator(path, beam_size=2, alpha=0.0, no_repeat_ngram_size=2, repetition_penalty=1.3)
    assert (overridden.beam_size, overridden.alpha) == (2, 0.0)
    assert (overridden.no_repeat_ngram_size, overridden.repetition_penalty) == (2, 1.3)
    # A guard fixed at export is the CTranslate2 directory's default.
    guarded = restore.make_translator(config.decoding, model, tokenizer, no_repeat_ngram_size=3)
    path = ctranslate2_export.export_translator_ctranslate2(guarded, str(tmp_path / "ct2_guarded"), "int8")
    assert CTranslate2Translator(path).no_repeat_ngram_size == 3
    # CTranslate2's Transformer is one model: an ensemble is refused before anything is written.
    ensemble = restore.make_translator(config.decoding, [model, model], tokenizer)
    with pytest.raises(ValueError, match="one Transformer; got an ensemble of 2"):
        ctranslate2_export.export_translator_ctranslate2(ensemble, str(tmp_path / "ensemble"), "int8")
    assert not os.path.exists(tmp_path / "ensemble")


def test_long_inputs_are_truncated_and_blank_ones_give_empty_output(trained_run, tmp_path):
    """As `Translator` does: input beyond max_input_length - 1 pieces is cut
    (so appending words changes nothing), and blank lines give "" and 0."""
    config = load_config(trained_run)
    _, model, tokenizer = restore.restore(trained_run)
    path = ctranslate2_export.export_translator_ctranslate2(
        restore.make_translator(config.decoding, model, tokenizer), str(tmp_path / "ct2"), "float32")
    translator = CTranslate2Translator(path, alpha=0.0)
    long = " ".join(["seven hundred forty-three"] * 20)
    (a, b, blank), scores = translator.translate_batch([long, long + " and more words", " "])
    assert a == b and blank == "" and scores[2] == 0.0 and scores[0] < 0
    pieces = translator.sentencepiece.encode(long, out_type=str)
    assert len(pieces) > config.max_length


def test_bad_requests_are_refused_with_the_reason(trained_run, tmp_path, capsys, monkeypatch):
    output = str(tmp_path / "ct2")
    assert cli.export_main(["--model-dir", trained_run, "--format", "ctranslate2", "--output", output]) == 0
    capsys.readouterr()
    assert json.load(open(os.path.join(output, "keras_transformer.json")))["quantization"] == "int8"  # default

    code, _, err = run_entry_point(cli.export_main, ["--model-dir", trained_run, "--format", "ctranslate2",
                                             "--output", output], capsys)
    assert code == 1 and "already exists" in err
    code, _, err = run_entry_point(cli.export_main, ["--model-dir", trained_run, "--output", output,
                                             "--quantization", "int8"], capsys)
    assert code == 2 and "--quantization applies to --format ctranslate2" in err

    code, _, err = run_entry_point(cli.translate_main, ["--model", output, "--weights", "x.weights.h5",
                                                "--input", os.devnull], capsys)
    assert code == 1 and "its weights were fixed at export" in err
    with pytest.raises(ValueError, match="beam_size must be at least 1; got 0"):
        loading.load_translator(output, beam_size=0)

    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # as if the extra were not installed
    code, _, err = run_entry_point(cli.translate_main, ["--model", output, "--input", os.devnull], capsys)
    assert code == 1 and 'pip install -e ".[ctranslate2]"' in err
    code, _, err = run_entry_point(cli.export_main, ["--model-dir", trained_run, "--format", "ctranslate2",
                                             "--output", str(tmp_path / "other")], capsys)
    assert code == 1 and 'pip install -e ".[ctranslate2]"' in err
    assert not os.path.exists(tmp_path / "other")


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_forced_prefixes_agree_with_ctranslate2_target_prefix(trained_run, sentences, small_corpus, tmp_path, alpha):
    config = load_config(trained_run)
    _, model, tokenizer = restore.restore(trained_run)
    path = ctranslate2_export.export_translator_ctranslate2(
        restore.make_translator(config.decoding, model, tokenizer), str(tmp_path / "ct2"), "float32")
    ours = restore.make_translator(config.decoding, model, tokenizer, alpha=alpha)
    theirs = CTranslate2Translator(path, alpha=alpha, threads=1)
    _, test = small_corpus
    # Prefixes of one to three words of a reference: its own (the likely start) or another sentence's.
    prefixes = [" ".join(test[40 + (i if i % 2 else i + 7) % 60][1].split()[:1 + i % 3]) if i % 4 else ""
                for i in range(len(sentences))]
    expected = ours.translate(sentences, progress=False, prefixes=prefixes)
    got = theirs.translate(sentences, progress=False, prefixes=prefixes)
    assert all(t.startswith(p) for t, p in zip(expected.best, prefixes))
    assert all(t.startswith(p) for t, p in zip(got.best, prefixes))
    # At alpha 0 the same translations; at 0.6 almost all (58 of 60 when written), and where they differ
    # CTranslate2's beam missed a hypothesis that scores higher, its prefix's log-probabilities counted as ours.
    agree = [a == b for a, b in zip(got.best, expected.best)]
    assert sum(agree) >= (len(sentences) if alpha == 0 else 0.9 * len(sentences))
    differ = ~np.array(agree)
    assert np.all(expected.scores[differ, 0] >= got.scores[differ, 0] - 1e-4)
    np.testing.assert_allclose(got.scores[~differ, 0], expected.scores[~differ, 0], atol=1e-3)
    with pytest.raises(ValueError, match="no lexically constrained search"):
        theirs.translate(sentences[:1], constraints=[["Uhr"]])


def test_ctranslate2_commands(tmp_path, trained_tiny_run):
    """The CTranslate2 section on a trained tiny run in the main job's place:
    the export command writes the directory the translate command and the
    Python block use, and both print the same translation, which is the one
    CTranslate2 gives with the run's own decoding settings."""
    from keras_transformer.export.ctranslate2_translator import CTranslate2Translator

    checkout = make_checkout(tmp_path)
    shutil.copytree(trained_tiny_run, checkout / "runs" / "numerals_en_de-small")
    export = docs_command(r"^python scripts/export\.py .*--format ctranslate2")
    output = re.search(r"--output (\S+)", export).group(1)
    assert bash(checkout, export).stdout.strip() == output
    command = docs_command(r"^echo .* \| python scripts/translate\.py --model ct2_models/")
    assert f"--model {output}" in command
    printed = bash(checkout, command).stdout
    sentence = re.match(r'^echo "(.*)" \|', command).group(1)
    (expected,), _ = CTranslate2Translator(str(checkout / output)).translate_batch([sentence])
    assert printed == expected + "\n" and expected

    # The block ranks with CTranslate2's own length penalty (length ** alpha), not the run's, so its translation
    # is CTranslate2's at the block's settings, which can differ from the one above on another CPU's int8 kernels.
    import ctranslate2
    import sentencepiece

    block = docs_block("ctranslate2.Translator(")
    assert f'"{output}"' in block and f'"{output}/sentencepiece.model"' in block and sentence in block
    compute_type = re.search(r'compute_type="(\w+)"', block).group(1)
    options = {name: float(value) if "." in value else int(value) for name, value in
               re.findall(r"(beam_size|length_penalty|min_decoding_length)=([\d.]+)", block)}
    assert set(options) == {"beam_size", "length_penalty", "min_decoding_length"}
    pieces = sentencepiece.SentencePieceProcessor(model_file=str(checkout / output / "sentencepiece.model"))
    (own,) = ctranslate2.Translator(str(checkout / output), compute_type=compute_type).translate_batch(
        pieces.encode([sentence], out_type=str), **options)
    own_translation = pieces.decode(own.hypotheses[0])
    result = subprocess.run([sys.executable, "-c", block], cwd=checkout, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert ast.literal_eval(result.stdout.strip().splitlines()[-1]) == [own_translation] and own_translation
