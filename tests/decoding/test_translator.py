import numpy as np
import pytest

from keras_transformer.decoding import restore
from keras_transformer.decoding.translator import Translator

SENTENCES = ["It is half past seven.", "", "three hundred twenty-one", "  ", "on the third of May"]


def test_greedy_translates_as_beam_one_without_length_penalty(tiny_run_dir):
    config, model, tokenizer = restore.restore(tiny_run_dir)
    beam = restore.make_translator(config.decoding, model, tokenizer, beam_size=1, alpha=0.0)
    greedy = restore.make_translator(config.decoding, model, tokenizer, beam_size=1, alpha=0.0, greedy=True)
    expected, expected_scores = beam.translate(SENTENCES, batch_size=2, progress=False)
    got, scores = greedy.translate(SENTENCES, batch_size=2, progress=False)
    assert got == expected and got[1] == got[3] == [""]  # blank input, blank output, as everywhere
    np.testing.assert_allclose(scores, expected_scores, atol=1e-4)


@pytest.mark.parametrize("options,n", [({}, 1), ({"n_best": 3}, 3), ({"greedy": True, "beam_size": 1}, 1),
                                       ({"sampling": {"seed": 1}}, 1)])
def test_every_translator_returns_n_hypotheses_per_sentence(tiny_run_dir, options, n):
    """One result shape whatever the settings: a list of N strings and N scores per sentence."""
    config, model, tokenizer = restore.restore(tiny_run_dir)
    translator = restore.make_translator(config.decoding, model, tokenizer, **options)
    result = translator.translate(SENTENCES, batch_size=2, progress=False)
    assert [len(hypotheses) for hypotheses in result.texts] == [n] * len(SENTENCES)
    assert result.scores.shape == (len(SENTENCES), n)
    assert result.best == [hypotheses[0] for hypotheses in result.texts]
    translations, scores = translator.translate_strings(SENTENCES)  # in-graph: (B, N) each
    assert tuple(translations.shape) == tuple(scores.shape) == (len(SENTENCES), n)
    if "sampling" not in options:  # a sample depends on the batch it was drawn in
        assert result.best[0] == translations.numpy()[0, 0].decode("utf-8")


def test_greedy_needs_beam_one_and_no_sampling(tiny_run_dir):
    _, model, tokenizer = restore.restore(tiny_run_dir)
    with pytest.raises(ValueError, match="greedy search keeps one hypothesis.*beam_size=4"):
        Translator(model, tokenizer, beam_size=4, greedy=True)
    with pytest.raises(ValueError, match="greedy search .*sampling"):
        Translator(model, tokenizer, beam_size=1, greedy=True, sampling={"top_k": 5})


def test_one_model_is_an_ensemble_of_one(tiny_run_dir):
    _, model, tokenizer = restore.restore(tiny_run_dir)
    assert Translator(model, tokenizer).models == Translator([model], tokenizer).models == [model]
    assert not hasattr(Translator(model, tokenizer), "model")  # one attribute, whatever the count


def test_bad_constraints_and_prefixes_raise_naming_the_sentence(translator):
    sentences = ["It is half past seven.", "three hundred twenty-one"]
    with pytest.raises(ValueError, match=r"Sentence 2: the constraint ' ' is empty or holds a tab"):
        translator.translate(sentences, progress=False, constraints=[["Uhr"], [" "]])
    with pytest.raises(ValueError, match=r"Sentence 1: the constraint 'a\\tb'"):
        translator.translate(sentences, progress=False, constraints=[["a\tb"], []])
    with pytest.raises(ValueError, match="1 lines of prefixes for 2 sentences"):
        translator.translate(sentences, progress=False, prefixes=["Es"])
    with pytest.raises(ValueError, match="Sentence 1 has 5 constraints; beam size 4 holds at most 4"):
        translator.translate(sentences, progress=False, constraints=[["a", "b", "c", "d", "e"], []])
    # None and empty lists are no constraints: beam search's translations and scores.
    plain = translator.translate(sentences, progress=False)
    empty = translator.translate(sentences, progress=False, constraints=[[], []], prefixes=["", ""])
    assert empty.texts == plain.texts and (empty.scores == plain.scores).all()


@pytest.mark.slow
def test_a_new_alpha_translates_as_a_new_translator_without_a_retrace(tiny_run_dir):
    """The model choice tries several length penalties with one Translator
    (`recipe.choose_length_penalty`): setting `alpha` gives what a Translator
    made at that alpha gives, plain and constrained, through the same traced
    functions."""
    config, model, tokenizer = restore.restore(tiny_run_dir)
    reused = restore.make_translator(config.decoding, model, tokenizer, alpha=0.6)
    terms = {"constraints": [["Uhr"], [], [], [], []], "prefixes": ["Es", "", "", "", ""]}
    at_first = reused.translate(SENTENCES, batch_size=2, progress=False)
    reused.translate(SENTENCES, batch_size=2, progress=False, **terms)
    reused.alpha = 1.2
    fresh = restore.make_translator(config.decoding, model, tokenizer, alpha=1.2)
    for given in ({}, terms):
        got, expected = (t.translate(SENTENCES, batch_size=2, progress=False, **given) for t in (reused, fresh))
        assert got.texts == expected.texts
        np.testing.assert_allclose(got.scores, expected.scores, rtol=1e-6)
    assert not np.allclose(at_first.scores[0], fresh.translate(SENTENCES[:1], progress=False).scores[0])
    assert reused._function.experimental_get_tracing_count() == 1
    assert reused._constrained_function.experimental_get_tracing_count() == 1
    with pytest.raises(ValueError, match="alpha must be non-negative; got -0.5"):
        reused.alpha = -0.5
    assert reused.alpha == 1.2
