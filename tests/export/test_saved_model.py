"""The SavedModel, loaded the ways TF Serving and its clients load it."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import keras_transformer
from keras_transformer import decoding
from keras_transformer.decoding import restore
from keras_transformer.export import loading, saved_model, settings
from tests.conftest import make_tiny_run_dir
from tests.helpers.serving_double import SessionModel

SENTENCES = ["It is half past seven.", "My brother bought two apples yesterday.", "three hundred twenty-one"]


@pytest.fixture(scope="module")
def exported(tiny_run_dir, tmp_path_factory):
    config, model, tokenizer = restore.restore(tiny_run_dir)
    translator = restore.make_translator(config.decoding, model, tokenizer)
    base = str(tmp_path_factory.mktemp("saved_models") / "tiny")
    return saved_model.export_translator(translator, base)


def in_process(translator, sentences):
    translations, scores = translator.translate_strings(tf.constant(sentences, tf.string))
    return [t.decode("utf-8") for t in translations.numpy()[:, 0]], scores.numpy()[:, 0]


def test_layout_is_base_slash_version_with_the_vocabulary_asset(exported, translator):
    base, version = os.path.split(exported)
    assert version == "1"
    assert os.path.exists(os.path.join(exported, "saved_model.pb"))
    with open(os.path.join(exported, "assets", "sentencepiece.model"), "rb") as f:
        assert f.read() == translator.tokenizer.model_proto
    assert settings.next_version(base) == 2
    # What was fixed at export, the precision the graph computes in among it.
    recorded = settings.read_settings(os.path.join(exported, "assets"))
    assert recorded == {"beam_size": 4, "alpha": 0.6, "n_best": 1, "max_input_length": 32, "extra_length": 50,
                        "no_repeat_ngram_size": 0, "repetition_penalty": 1.0,
                        "precision": translator.models[0].dtype_policy.name,
                        "keras_transformer_version": keras_transformer.__version__}


@pytest.mark.slow
def test_a_fresh_process_with_only_tensorflow_and_text_translates_the_same(exported, translator):
    script = (
        "import json, sys, tensorflow as tf, tensorflow_text\n"
        "assert not [m for m in sys.modules if m.startswith('keras_transformer')]\n"
        f"model = tf.saved_model.load({exported!r})\n"
        f"out = model.signatures['serving_default'](sentences=tf.constant({SENTENCES!r}))\n"
        "print(json.dumps({'t': [t.decode() for t in out['translations'].numpy()],"
        " 's': out['scores'].numpy().tolist()}))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-3000:]
    served = json.loads(result.stdout.strip().splitlines()[-1])
    expected, scores = in_process(translator, SENTENCES)
    assert served["t"] == expected
    np.testing.assert_allclose(served["s"], scores, atol=1e-4)


def test_session_loader_answers_a_serialized_predict_request(exported, translator):
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = "tiny"
    request.model_spec.signature_name = "serving_default"
    request.inputs["sentences"].CopyFrom(tf.make_tensor_proto(SENTENCES, dtype=tf.string))
    request = predict_pb2.PredictRequest.FromString(request.SerializeToString())  # as it crosses the wire

    model = SessionModel(os.path.dirname(exported))  # the newest version, as the model server picks it
    inputs = {k: tf.make_ndarray(v) for k, v in request.inputs.items()}
    outputs = model.run(request.model_spec.signature_name, inputs)
    model.close()
    response = predict_pb2.PredictResponse()
    for key, value in outputs.items():
        response.outputs[key].CopyFrom(tf.make_tensor_proto(value))
    response = predict_pb2.PredictResponse.FromString(response.SerializeToString())
    translations = [t.decode("utf-8") for t in tf.make_ndarray(response.outputs["translations"])]
    assert translations == in_process(translator, SENTENCES)[0]
    assert set(model.signatures) >= {"serving_default", "translate_ids"}


def test_saved_model_cli_lists_every_signature(exported):
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    result = subprocess.run([cli, "show", "--dir", exported, "--all"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "signature_def['serving_default']" in result.stdout
    assert "signature_def['translate_ids']" in result.stdout
    assert "signature_def['translate_constrained']" in result.stdout
    assert "inputs['constraints'] tensor_info:" in result.stdout and "inputs['prefixes'] tensor_info:" in result.stdout
    assert "inputs['sentences'] tensor_info:" in result.stdout
    assert "outputs['translations'] tensor_info:" in result.stdout and "outputs['scores'] tensor_info:" in result.stdout


def test_translate_ids_signature_equals_in_process_beam_search(exported, translator):
    loaded = tf.saved_model.load(exported)
    source_ids = translator.encode_sources(tf.constant(SENTENCES))
    out = loaded.signatures["translate_ids"](source_ids=source_ids)
    ids, scores = decoding.beam_search(translator.models[0], source_ids, beam_size=4, alpha=0.6)
    np.testing.assert_array_equal(out["ids"], ids[:, 0])  # a 1-best export answers [B, L]
    np.testing.assert_allclose(out["scores"], scores[:, 0], atol=1e-4)


@pytest.mark.slow
def test_bad_input_has_defined_results_and_never_disturbs_its_neighbours(exported, translator):
    serve = tf.saved_model.load(exported).signatures["serving_default"]
    long_sentence = " ".join(["seven"] * 10000)
    batch = [SENTENCES[0], "", "   \t ", long_sentence, b"caf\xc3 \xff\xfe broken", SENTENCES[1]]
    out = serve(sentences=tf.constant(batch, tf.string))
    translations = [t.decode("utf-8") for t in out["translations"].numpy()]
    scores = out["scores"].numpy()
    assert translations[1] == translations[2] == "" and scores[1] == scores[2] == 0.0
    assert np.isfinite(scores).all()
    # The long sentence is truncated to max_input_length pieces; output is bounded by that + 50.
    long_ids = translator.encode_sources(tf.constant([long_sentence]))
    assert long_ids.shape[1] == translator.max_input_length
    # Invalid UTF-8 is replaced, not fatal, and equals translating the repaired text.
    repaired = b"caf\xc3 \xff\xfe broken".decode("utf-8", "replace")
    assert translations[4] == in_process(translator, [repaired])[0][0]
    # The good sentences translate as they do alone.
    assert [translations[0], translations[5]] == in_process(translator, [SENTENCES[0], SENTENCES[1]])[0]
    empty = serve(sentences=tf.constant([], tf.string))
    assert out["translations"].dtype == tf.string and tuple(empty["translations"].shape) == (0,)
    assert tuple(empty["scores"].shape) == (0,)


@pytest.mark.slow
def test_each_export_gets_the_next_version(tiny_run_dir, tmp_path):
    config, model, tokenizer = restore.restore(tiny_run_dir)
    translator = restore.make_translator(config.decoding, model, tokenizer, beam_size=1, alpha=0.0)
    base = str(tmp_path / "m")
    assert saved_model.export_translator(translator, base).endswith(os.path.join("m", "1"))
    assert saved_model.export_translator(translator, base).endswith(os.path.join("m", "2"))
    assert sorted(os.listdir(base)) == ["1", "2"]


def test_a_failed_export_leaves_no_partial_folder(translator, tmp_path, monkeypatch):
    def fail(directory, values):
        raise OSError("disk full")

    monkeypatch.setattr(saved_model, "write_settings", fail)
    with pytest.raises(OSError, match="disk full"):
        saved_model.export_translator(translator, str(tmp_path / "base"))
    assert os.listdir(tmp_path / "base") == []  # neither "1" nor "1.partial"
    assert settings.next_version(str(tmp_path / "base")) == 1


@pytest.mark.slow
def test_constrained_signature_equals_the_translator_on_100_sentences(exported, translator, small_corpus):
    _, test = small_corpus
    sentences = [source for source, _ in test[:100]]
    # Two words of the reference per sentence as constraints, the first word of another as a prefix for some.
    constraints = [reference.split()[-1:] + reference.split()[:1] for _, reference in test[:100]]
    prefixes = [test[i + 1][1].split()[0] if i % 3 == 0 else "" for i in range(100)]
    expected = translator.translate(sentences, batch_size=32, progress=False, constraints=constraints,
                                    prefixes=prefixes)
    serve = tf.saved_model.load(exported).signatures["translate_constrained"]
    served, scores = [], []
    for first in range(0, 100, 32):
        out = serve(sentences=tf.constant(sentences[first:first + 32]),
                    constraints=tf.constant(["\t".join(c) for c in constraints[first:first + 32]]),
                    prefixes=tf.constant(prefixes[first:first + 32]))
        served += [t.decode("utf-8") for t in out["translations"].numpy()]
        scores += out["scores"].numpy().tolist()
    assert served == expected.best
    # The same translations; their scores to float32's rounding: on a 2-core AMD EPYC without AVX-512 the
    # SavedModel's graph summed 11 of the 100 differently, by at most 1.8e-7 of the score (1-2 ulps).
    np.testing.assert_allclose(np.float32(scores), expected.scores[:, 0], rtol=1e-6, atol=0)
    # What translate.py runs on a SavedModel: the loader, through the same signature.
    loaded = loading.load_translator(os.path.dirname(exported))
    assert loaded.translate(sentences, 32, False, constraints, prefixes).best == expected.best
    assert sum(p != "" and t.startswith(p) for t, p in zip(served, prefixes)) == sum(p != "" for p in prefixes)


@pytest.mark.slow
def test_session_loader_serves_constraints_and_a_bad_sentence_never_fails_its_batch(exported, translator):
    # Phrases that tokenize to nothing and more phrases than the beam holds have defined answers.
    constraints = ["Uhr", " \t ", "\t".join(["eins", "zwei", "drei", "vier", "fünf", "sechs"]), ""]
    sentences = SENTENCES + ["It is half past seven."]
    model = SessionModel(os.path.dirname(exported))
    outputs = model.run("translate_constrained", {"sentences": np.array(sentences, object),
                                                  "constraints": np.array(constraints, object),
                                                  "prefixes": np.array(["", "", "", "Es"], object)})
    model.close()
    served = [t.decode("utf-8") for t in outputs["translations"]]
    # Each as the Translator gives it alone: the empty phrases are none, and only the first four (beam 4) count.
    alone = [translator.translate([sentences[0]], progress=False, constraints=[["Uhr"]]).best[0],
             translator.translate([sentences[1]], progress=False).best[0],
             translator.translate([sentences[2]], progress=False, constraints=[["eins", "zwei", "drei", "vier"]]
                                  ).best[0],
             translator.translate([sentences[3]], progress=False, prefixes=["Es"]).best[0]]
    assert served == alone
    assert "Uhr" in served[0] and served[3].startswith("Es")
    assert all(word in served[2] for word in ("eins", "zwei", "drei", "vier"))


@pytest.mark.slow
def test_a_run_of_unequal_depths_restores_and_serves_as_it_was_built(tokenizer_path, small_corpus, tmp_path):
    """--encoder-layers 3 --decoder-layers 1 reach the run folder, the restored model and the SavedModel."""
    (tmp_path / "run").mkdir()
    run = make_tiny_run_dir(tmp_path / "run", tokenizer_path, small_corpus, encoder_layers=3, decoder_layers=1)
    config, model, tokenizer = restore.restore(run)
    assert (config.encoder_layers, config.decoder_layers) == (3, 1)
    assert (len(model.encoder.blocks), len(model.decoder.blocks)) == (3, 1)
    translator = restore.make_translator(config.decoding, model, tokenizer)
    exported = saved_model.export_translator(translator, str(tmp_path / "saved_models" / "tiny"))
    source_ids = translator.encode_sources(tf.constant(SENTENCES))
    out = tf.saved_model.load(exported).signatures["translate_ids"](source_ids=source_ids)
    ids, scores = decoding.beam_search(model, source_ids, beam_size=4, alpha=0.6)
    np.testing.assert_array_equal(out["ids"], ids[:, 0])
    np.testing.assert_allclose(out["scores"], scores[:, 0], atol=1e-4)
