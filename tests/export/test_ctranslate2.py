"""The CTranslate2 export: the same numbers and the same translations as our model.

ctranslate2 is in the test extra, so these always run in CI.
"""

import itertools
import json
import os
import sys

import ctranslate2
import numpy as np
import pytest
import tensorflow as tf

import keras_transformer as kt
from keras_transformer import decoding
from keras_transformer.export import ctranslate2 as ctranslate2_export
from keras_transformer.modeling.special_ids import EOS_ID
from tests.conftest import built_once
from tests.helpers.reversal_task import (SOURCE_VOCAB, padded, pairs, reversal_model_of, train_reversal_model,
                                         vocabulary)

# norm_first, tie_embeddings, separate target vocabulary size (None: shared), (encoder, decoder) depths.
# Every pair of values of the first three appears in some variant (a pairwise design: 4 trained
# models where all combinations take 8), and the unequal depths ride on two of them.
VARIANTS = [(False, True, None, (3, 1)), (True, True, 20, (1, 3)),
            (False, False, 20, (2, 2)), (True, False, None, (2, 2))]


def variant_id(variant):
    norm_first, tie, target_vocab, depths = variant
    return "-".join(["pre_norm" if norm_first else "post_norm", "tied" if tie else "untied",
                     "separate" if target_vocab else "shared", "%d_%d" % depths])


def test_the_variants_cover_every_pair_of_settings():
    """Each two of norm_first, tied embeddings and a separate target vocabulary meet in all four
    combinations, and both kinds of unequal depth are trained."""
    settings = [(norm_first, tie, target_vocab is not None) for norm_first, tie, target_vocab, _ in VARIANTS]
    for i, j in itertools.combinations(range(3), 2):
        assert {(s[i], s[j]) for s in settings} == set(itertools.product((False, True), repeat=2))
    assert {depths for *_, depths in VARIANTS} >= {(3, 1), (1, 3)}


def write(model, path, quantization="float32", target_vocab=None, max_positions=64):
    source_tokens = vocabulary(SOURCE_VOCAB, "s")
    target_tokens = vocabulary(target_vocab, "t") if target_vocab else None
    spec = ctranslate2_export.transformer_spec(model, source_tokens, target_tokens, max_positions=max_positions)
    ctranslate2_export.write_spec(spec, str(path), quantization)
    return source_tokens, target_tokens or source_tokens


def teacher_forced_log_probs(model, source_ids, target):
    """log P of each target token and of the final EOS, by one full decoder pass."""
    target_in = np.array([[2] + target], "int32")
    logits = model((np.array([source_ids], "int32"), target_in), training=False)  # (1, T, V)
    log_probs = tf.nn.log_softmax(logits)[0].numpy()  # (T, V)
    return [log_probs[i, token] for i, token in enumerate(target + [EOS_ID])]


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS, ids=variant_id)
def test_same_log_probs_and_same_beam_translations_for_every_variant(variant, tmp_path):
    """On a trained tiny model of each variant, CTranslate2 float32:
    - scores given targets with our teacher-forced log-probabilities;
    - with beam 4 and alpha 0, picks our beam search's translations, with its scores."""
    norm_first, tie, target_vocab, depths = variant
    model = train_reversal_model(norm_first, tie, target_vocab, num_encoder_layers=depths[0],
                                 num_decoder_layers=depths[1])
    assert (len(model.encoder.blocks), len(model.decoder.blocks)) == depths
    assert_ctranslate2_translates_as_we_do(model, target_vocab, tmp_path)


def assert_ctranslate2_translates_as_we_do(model, target_vocab, tmp_path):
    """CTranslate2 float32 of `model` scores given targets with our log-probabilities and,
    with beam 4 and alpha 0, picks our beam search's translations with their scores."""
    source_tokens, target_tokens = write(model, tmp_path / "ct2", target_vocab=target_vocab)
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), compute_type="float32", intra_threads=1)

    sources, _ = pairs(np.random.default_rng(7), 48, target_vocab or SOURCE_VOCAB)
    ids, scores = (x.numpy()[:, 0] for x in decoding.beam_search(model, padded(sources, 9), beam_size=4, alpha=0.0))
    ours = [list(row[: list(row).index(EOS_ID)]) for row in ids]
    assert all(len(row) < len(source) + 40 for row, source in zip(ours, sources))  # all ended on EOS

    source_strings = [[source_tokens[i] for i in s[:-1]] for s in sources]  # CTranslate2 adds the EOS
    results = translator.translate_batch(source_strings, beam_size=4, length_penalty=0.0, min_decoding_length=0,
                                         max_decoding_length=60, return_scores=True)
    theirs = [[target_tokens.index(t) for t in r.hypotheses[0]] for r in results]
    assert theirs == ours
    np.testing.assert_allclose([r.scores[0] for r in results], scores, rtol=1e-4, atol=1e-4)

    # Teacher forcing: their log-probability of each token of given targets is ours.
    for source, target in list(zip(sources, ours))[:8]:
        (scored,) = translator.score_batch([[source_tokens[i] for i in source[:-1]]],
                                           [[target_tokens[i] for i in target]])
        np.testing.assert_allclose(scored.log_probs, teacher_forced_log_probs(model, source, target),
                                   rtol=1e-4, atol=1e-4)


def test_position_table_is_ours_not_ctranslate2s_builtin(tmp_path):
    """The written encodings are our interleaved sin/cos from position 0."""
    model = kt.Transformer.from_preset("tiny", vocab_size=SOURCE_VOCAB)
    model.build()
    spec = ctranslate2_export.transformer_spec(model, vocabulary(SOURCE_VOCAB, "s"), max_positions=10)
    table = spec.encoder.position_encodings.encodings
    assert table.shape == (10, 32)
    np.testing.assert_allclose(table[0], [0.0, 1.0] * 16, atol=1e-7)  # sin 0, cos 0, interleaved
    np.testing.assert_allclose(table[3, :2], [np.sin(3.0), np.cos(3.0)], atol=1e-6)
    assert spec.decoder.position_encodings.encodings is table


def test_config_adds_the_source_eos_and_starts_from_bos(tmp_path):
    model = kt.Transformer.from_preset("tiny", vocab_size=SOURCE_VOCAB)
    model.build()
    write(model, tmp_path / "ct2")
    config = json.load(open(tmp_path / "ct2" / "config.json"))
    assert config["add_source_eos"] is True and config["add_source_bos"] is False
    assert (config["bos_token"], config["eos_token"], config["unk_token"]) == ("<s>", "</s>", "<unk>")
    assert config["decoder_start_token"] == "<s>"
    assert config["layer_norm_epsilon"] == pytest.approx(1e-6)


@pytest.fixture(scope="module")
def reversal_model(tmp_path_factory):
    """The default variant, trained once for both workers (`built_once`) and loaded by each."""
    folder = built_once(tmp_path_factory, "reversal_model",
                        lambda folder: train_reversal_model().save_weights(folder / "model.weights.h5"))
    model = reversal_model_of()
    model.load_weights(folder / "model.weights.h5")
    return model


@pytest.mark.slow
@pytest.mark.parametrize("quantization", ["int8", "float16"])
def test_quantized_weights_are_smaller_and_translate_alike(quantization, reversal_model, tmp_path):
    """int8 stores about a quarter of float32's bytes and float16 half; on a
    trained model both translate as float32 does. (How far a quantized
    log-probability strays depends on the CPU's int8 kernels: on a 2-core
    AMD EPYC without AVX-512 a random model's moved by up to 0.7, so
    the test compares translations, not log-probabilities.)"""
    source_tokens, target_tokens = write(reversal_model, tmp_path / "float32")
    write(reversal_model, tmp_path / quantization, quantization)
    ratio = os.path.getsize(tmp_path / quantization / "model.bin") / os.path.getsize(tmp_path / "float32" / "model.bin")
    assert ratio < {"int8": 0.4, "float16": 0.6}[quantization]
    sources, _ = pairs(np.random.default_rng(5), 48, SOURCE_VOCAB)
    batch = [[source_tokens[i] for i in s[:-1]] for s in sources]

    def translate(kind):
        translator = ctranslate2.Translator(str(tmp_path / kind), compute_type="default", intra_threads=1)
        return [r.hypotheses[0] for r in translator.translate_batch(batch, beam_size=4, max_decoding_length=60)]

    exact, approx = translate("float32"), translate(quantization)
    # The tiny model's 32-wide layers are where int8 loses most: 38 of 48 alike on that machine (the
    # main job's slow test holds int8 to within 1 BLEU of float32 on a real model).
    assert sum(a == e for a, e in zip(approx, exact)) >= {"int8": 0.7, "float16": 0.95}[quantization] * len(exact)
    # Not vacuous: the model has learnt the task (38 of these 48 reversed right when this was written).
    assert sum(e == [target_tokens[i] for i in reversed(s[:-1])] for e, s in zip(exact, sources)) >= 0.5 * len(exact)


def test_unconvertible_models_and_vocabularies_are_named(tmp_path):
    model = kt.Transformer.from_preset("tiny", vocab_size=SOURCE_VOCAB)
    with pytest.raises(ValueError, match="not built"):
        ctranslate2_export.transformer_spec(model, vocabulary(SOURCE_VOCAB, "s"))
    model.build()
    with pytest.raises(ValueError, match=r"source vocabulary has 30 tokens but the model's source embedding has 24"):
        ctranslate2_export.transformer_spec(model, vocabulary(30, "s"))
    with pytest.raises(ValueError, match="duplicate tokens"):
        ctranslate2_export.transformer_spec(model, vocabulary(SOURCE_VOCAB - 1, "s") + ["s4"])
    model.encoder.blocks[0].feed_forward.activation = tf.nn.gelu
    with pytest.raises(ValueError, match="activation 'gelu' is not supported"):
        ctranslate2_export.transformer_spec(model, vocabulary(SOURCE_VOCAB, "s"))


def test_write_refuses_an_existing_directory_and_unknown_quantization(tmp_path):
    model = kt.Transformer.from_preset("tiny", vocab_size=SOURCE_VOCAB)
    model.build()
    spec = ctranslate2_export.transformer_spec(model, vocabulary(SOURCE_VOCAB, "s"), max_positions=16)
    with pytest.raises(ValueError, match=r"Unknown quantization 'int4'; expected one of \['int8'"):
        ctranslate2_export.write_spec(spec, str(tmp_path / "a"), "int4")
    (tmp_path / "b").mkdir()
    with pytest.raises(ValueError, match="already exists"):
        ctranslate2_export.write_spec(spec, str(tmp_path / "b"), "int8")
    assert os.listdir(tmp_path / "b") == []


def test_importing_the_package_does_not_import_ctranslate2():
    import subprocess

    code = "import sys, keras_transformer, keras_transformer.cli; print([m for m in sys.modules if 'ctranslate2' in m])"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.slow
@pytest.mark.parametrize("guards", [{"repetition_penalty": 1.5}, {"repetition_penalty": 0.6},
                                    {"no_repeat_ngram_size": 1}, {"no_repeat_ngram_size": 2}],
                         ids=["penalty_1.5", "penalty_0.6", "no_repeat_1", "no_repeat_2"])
def test_decoding_guards_translate_as_ctranslate2s_own(guards, reversal_model, tmp_path):
    """The same weights, beam 4, alpha 0: our guarded beam search picks
    CTranslate2's guarded translations, with its scores. The reversal task
    repeats tokens often enough that every guard changes some output."""
    model = reversal_model
    source_tokens, target_tokens = write(model, tmp_path / "ct2")
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), compute_type="float32", intra_threads=1)
    rng = np.random.default_rng(9)
    sources, _ = pairs(rng, 48, SOURCE_VOCAB)
    # Sources that repeat tokens: the reversal would repeat them too.
    sources = [source[:2] + source[:2] + source[2:-3] + [EOS_ID] for source in sources if len(source) >= 6]

    def ours(**settings):
        ids, scores = (x.numpy()[:, 0] for x in decoding.beam_search(model, padded(sources, 12), beam_size=4,
                                                                      alpha=0.0, **settings))
        return [list(row[: list(row).index(EOS_ID)]) for row in ids], scores

    source_strings = [[source_tokens[i] for i in s[:-1]] for s in sources]
    results = translator.translate_batch(source_strings, beam_size=4, length_penalty=0.0, min_decoding_length=0,
                                         max_decoding_length=60, return_scores=True, **guards)
    theirs = [[target_tokens.index(t) for t in r.hypotheses[0]] for r in results]
    guarded, scores = ours(**guards)
    assert guarded == theirs
    np.testing.assert_allclose([r.scores[0] for r in results], scores, rtol=1e-4, atol=1e-4)
    assert guarded != ours()[0]  # the guard changed something
