import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import decoding
from keras_transformer.data.tokenizer import EOS_ID, PAD_ID
from tests.conftest import random_ids, varied_tiny_model

RNG = np.random.default_rng(3)
SOURCE = random_ids(RNG, 4, 10, lengths=[10, 7, 3, 1])


def lengths(ids):
    """Output lengths up to and including EOS (or the full row)."""
    ids = np.asarray(ids)
    out = []
    for row in ids:
        eos = np.flatnonzero(row == EOS_ID)
        out.append(int(eos[0]) + 1 if len(eos) else int((row != PAD_ID).sum()))
    return np.array(out)


@pytest.fixture(scope="module")
def model():
    return varied_tiny_model()


def test_random_model_produces_varied_outputs(model):
    ids = np.asarray(decoding.greedy_search(model, SOURCE))
    assert len(np.unique(ids[ids > 3])) > 5  # the other tests are not comparing constant rows


def test_cached_step_logits_equal_the_full_decoder_pass(model):
    target = random_ids(RNG, 4, 8)
    full = np.asarray(model((SOURCE, target), training=False))
    tokens_to_logits, cache = decoding.model_tokens_to_logits(model, tf.constant(SOURCE), 8)
    for step in range(8):
        logits, cache = tokens_to_logits(tf.constant(target[:, step:step + 1]), cache, step)
        np.testing.assert_allclose(logits, full[:, step], atol=1e-5)


def test_greedy_cached_equals_uncached(model):
    cached = decoding.greedy_search(model, SOURCE, use_cache=True)
    uncached = decoding.greedy_search(model, SOURCE, use_cache=False)
    np.testing.assert_array_equal(cached, uncached)


def test_beam_cached_equals_uncached(model):
    ids_a, scores_a = decoding.beam_search(model, SOURCE, use_cache=True)
    ids_b, scores_b = decoding.beam_search(model, SOURCE, use_cache=False)
    np.testing.assert_array_equal(ids_a, ids_b)
    np.testing.assert_allclose(scores_a, scores_b, atol=1e-4)


def test_beam_one_without_length_penalty_is_greedy(model):
    ids, _ = decoding.beam_search(model, SOURCE, beam_size=1, alpha=0.0)
    np.testing.assert_array_equal(ids, decoding.greedy_search(model, SOURCE))


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_beam_scores_are_length_penalised_log_probabilities(model, alpha):
    ids, scores = decoding.beam_search(model, SOURCE, beam_size=3, alpha=alpha)
    ids = np.asarray(ids)
    n = lengths(ids)
    target_in = np.concatenate([np.full((4, 1), 2), ids[:, :-1]], axis=1).astype("int32")  # BOS + output
    log_probs = tf.nn.log_softmax(model((SOURCE, target_in), training=False)).numpy()
    for row in range(4):
        total = sum(log_probs[row, t, ids[row, t]] for t in range(n[row]))
        assert float(scores[row]) == pytest.approx(total / ((5 + n[row]) / 6) ** alpha, abs=1e-3)


def test_beam_search_never_scores_below_greedy_under_its_own_objective(model):
    greedy = np.asarray(decoding.greedy_search(model, SOURCE))
    greedy_as_beam, greedy_scores = decoding.beam_search(model, SOURCE, beam_size=1, alpha=0.6)
    _, beam_scores = decoding.beam_search(model, SOURCE, beam_size=4, alpha=0.6)
    del greedy, greedy_as_beam
    assert (np.asarray(beam_scores) >= np.asarray(greedy_scores) - 1e-4).all()


def test_output_never_exceeds_source_length_plus_50(model):
    source_lengths = (SOURCE != PAD_ID).sum(axis=1)
    for ids in (decoding.greedy_search(model, SOURCE), decoding.beam_search(model, SOURCE)[0]):
        assert (lengths(ids) <= source_lengths + 50).all()
        assert np.asarray(ids).shape[1] == source_lengths.max() + 50
    capped, _ = decoding.beam_search(model, SOURCE, max_length=5)
    assert (lengths(capped) <= 5).all()


def test_n_best_is_sorted_and_starts_with_the_one_best(model):
    best, best_score = decoding.beam_search(model, SOURCE, beam_size=4)
    ids, scores = decoding.beam_search(model, SOURCE, beam_size=4, n_best=3)
    assert tuple(ids.shape[:2]) == (4, 3)
    scores = np.asarray(scores)
    assert (np.diff(scores, axis=1) <= 1e-6).all()
    np.testing.assert_array_equal(np.asarray(ids)[:, 0], best)
    np.testing.assert_allclose(scores[:, 0], best_score, atol=1e-5)


def test_each_sentence_decodes_as_it_would_alone(model):
    batch_ids, _ = decoding.beam_search(model, SOURCE)
    for row in range(4):
        alone = SOURCE[row:row + 1, : max(1, (SOURCE[row] != PAD_ID).sum())]
        ids, _ = decoding.beam_search(model, alone)
        n = lengths(ids)[0]
        np.testing.assert_array_equal(np.asarray(ids)[0, :n], np.asarray(batch_ids)[row, :n])


def test_bad_arguments_are_named():
    model = varied_tiny_model()
    with pytest.raises(ValueError, match="n_best must be in \\[1, beam_size=2\\]; got 3"):
        decoding.beam_search(model, SOURCE, beam_size=2, n_best=3)
    with pytest.raises(ValueError, match="beam_size must be at least 1; got 0"):
        decoding.beam_search(model, SOURCE, beam_size=0)


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_searches_compile_with_xla_and_agree_with_the_graph(model, search):
    def run(ids):
        if search == "greedy":
            return decoding.greedy_search_graph(model, ids, max_length=12)
        return decoding.beam_search_graph(model, ids, beam_size=4, alpha=0.6, max_length=12)[0]

    xla = tf.function(run, jit_compile=True)(tf.constant(SOURCE))
    np.testing.assert_array_equal(xla, tf.function(run)(tf.constant(SOURCE)))
