"""`loading.load_translator`: one interface and one meaning of scores, whatever the model folder holds."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import search
from keras_transformer.decoding.translator import Translations
from keras_transformer.export import loading, saved_model
from keras_transformer.export.ctranslate2 import export_translator_ctranslate2
from keras_transformer.export.ctranslate2_translator import gnmt_scores


@pytest.fixture(scope="module")
def folders(trained_tiny_run, tmp_path_factory):
    """{kind: what load_translator takes} for one trained run and its two exports (float32)."""
    directory = tmp_path_factory.mktemp("exports")
    translator = loading.load_translator(trained_tiny_run)
    return {"run": trained_tiny_run, "ensemble": [trained_tiny_run, trained_tiny_run],
            "saved_model": saved_model.export_translator(translator, str(directory / "saved_model")),
            "ctranslate2": export_translator_ctranslate2(translator, str(directory / "ct2"), "float32")}


@pytest.fixture(scope="module")
def sentences(small_corpus):
    _, test = small_corpus
    return [source for source, _ in test[40:100]]


@pytest.mark.slow
def test_every_kind_of_model_folder_gives_the_same_methods_result_types_and_scores(folders, sentences):
    """The run folder, an ensemble of it with itself, its SavedModel and its
    CTranslate2 export translate through `translate` and `__call__` alike, and
    where two give the same translation they give it the same score (beam 4,
    alpha 0.6: the run's)."""
    loaded = {kind: loading.load_translator(path, threads=1) if kind == "ctranslate2" else
              loading.load_translator(path) for kind, path in folders.items()}
    # CTranslate2's own ranking picks by its length^alpha, and still reports our score of what it picked.
    loaded["ctranslate2 ranking"] = loading.load_translator(folders["ctranslate2"], threads=1, ranking="ctranslate2")
    reference = loaded["run"].translate(sentences, batch_size=16, progress=False)
    for kind, translator in loaded.items():
        result = translator.translate(sentences, batch_size=16, progress=False)
        assert isinstance(result, Translations), kind
        assert result.scores.shape == (len(sentences), 1) and result.scores.dtype == np.float32, kind
        texts, scores = translator(tf.constant(sentences[:3]))
        assert np.asarray(texts).shape == (3, 1) and np.asarray(scores).shape == (3, 1), kind
        assert [t.decode("utf-8") for t in np.asarray(texts)[:, 0]] == result.best[:3], kind
        same = [i for i, (a, b) in enumerate(zip(result.best, reference.best)) if a == b]
        if not kind.startswith("ctranslate2"):  # the same graph: the same translations
            assert len(same) == len(sentences), kind
        else:  # another engine's beam: it may finish other hypotheses (see the module's docstring)
            assert len(same) >= 0.8 * len(sentences), kind
        np.testing.assert_allclose(result.scores[same], reference.scores[same], rtol=1e-4, atol=1e-4,
                                   err_msg=kind)


def test_ctranslate2_hypotheses_are_ranked_by_our_penalty():
    """The rerank's penalty is `search.length_penalty` (lengths counting EOS):
    a long hypothesis with the lower log-probability can win at alpha 1 and
    loses at alpha 0."""
    log_probs, lengths = np.array([-3.0, -3.5]), np.array([3, 9])
    for alpha in (0.0, 0.6, 1.0):
        expected = log_probs / search.length_penalty(lengths, alpha).numpy()
        np.testing.assert_allclose(gnmt_scores(log_probs, lengths, alpha), expected, rtol=1e-6)
    assert np.argmax(gnmt_scores(log_probs, lengths, 0.0)) == 0
    assert np.argmax(gnmt_scores(log_probs, lengths, 1.0)) == 1  # -3/(8/6) = -2.25 < -3.5/(14/6) = -1.5


def test_a_savedmodel_refuses_settings_fixed_at_export(folders):
    with pytest.raises(ValueError, match="ranking='ctranslate2' applies to CTranslate2 only"):
        loading.load_translator(folders["saved_model"], ranking="ctranslate2")
    with pytest.raises(ValueError, match="Unknown ranking 'gnmt'; expected one of"):
        loading.load_translator(folders["ctranslate2"], ranking="gnmt")
    with pytest.raises(ValueError, match="fixed at export"):
        loading.load_translator(folders["saved_model"], alpha=0.0)
    with pytest.raises(ValueError, match="ensembles, --n-best and sampling need training model directories"):
        loading.load_translator(folders["saved_model"], n_best=2)
