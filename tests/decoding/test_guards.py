"""The decoding guards: CTranslate2's repetition penalty and n-gram blocking.

Their agreement with CTranslate2 itself, on one set of weights, is in
tests/export/test_ctranslate2.py.
"""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import decoding
from keras_transformer.decoding import guards, search
from keras_transformer.decoding.sampling import NEG_INF
from keras_transformer.decoding.step import StepCache
from keras_transformer.modeling.special_ids import EOS_ID, PAD_ID
from tests.conftest import random_ids, varied_tiny_model

RNG = np.random.default_rng(11)
SOURCE = random_ids(RNG, 4, 10, lengths=[10, 7, 3, 2])


def reference_penalty(logits, produced, penalty):
    out = logits.copy()
    for row, tokens in enumerate(produced):
        for token in set(tokens):
            value = logits[row, token]
            out[row, token] = value * penalty if value < 0 else value / penalty
    return out


def reference_blocked(produced, n):
    """{row: banned tokens}, by the definition: the token after each earlier
    occurrence of the last n - 1 tokens."""
    banned = {}
    for row, tokens in enumerate(produced):
        tokens = list(tokens)
        last = tokens[len(tokens) - n + 1:] if n > 1 else []
        banned[row] = {tokens[j + n - 1] for j in range(len(tokens) - n + 1) if tokens[j:j + n - 1] == last}
    return banned


def test_the_penalty_divides_positive_and_multiplies_negative_logits_of_produced_tokens():
    logits = RNG.normal(size=(3, 12)).astype("float32")
    produced = np.array([[4, 5, 4, 9], [11, 11, 11, 11], [6, 7, 8, 0]], "int32")
    got = guards.penalize_repetitions(tf.constant(logits), tf.constant(produced), 1.7).numpy()
    np.testing.assert_allclose(got, reference_penalty(logits, produced, 1.7), rtol=1e-6)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_blocking_bans_exactly_the_tokens_that_would_repeat_an_n_gram(n):
    produced = np.array([[4, 5, 6, 4, 5, 7, 4, 5], [8, 8, 8, 8, 8, 8, 8, 8], [4, 5, 6, 7, 8, 9, 10, 11]], "int32")
    logits = np.zeros((3, 12), "float32")
    got = guards.block_repeated_ngrams(tf.constant(logits), tf.constant(produced), n).numpy()
    for row, banned in reference_blocked(produced, n).items():
        assert set(np.flatnonzero(got[row] == NEG_INF)) == banned, (n, row)
    assert (got[1] == NEG_INF).any() and ((got[0] == NEG_INF).any() or n == 4)  # the cases are not vacuous


def test_blocking_waits_for_n_minus_1_tokens():
    guard = guards.make_guard(no_repeat_ngram_size=3)
    logits = tf.zeros((2, 8))
    for length in (0, 1):
        produced = tf.fill([2, length], 5)
        np.testing.assert_array_equal(guard(logits, produced), logits)


@pytest.mark.parametrize("settings,message", [
    ({"no_repeat_ngram_size": -1}, r"no_repeat_ngram_size must be a whole number >= 0 \(0: off\); got -1"),
    ({"no_repeat_ngram_size": 1.5}, r"got 1.5"),
    ({"repetition_penalty": 0.0}, r"repetition_penalty must be > 0 \(1: off\); got 0.0"),
])
def test_bad_settings_are_named(settings, message):
    with pytest.raises(ValueError, match=message):
        guards.make_guard(**settings)
    with pytest.raises(ValueError, match=message):
        decoding.beam_search(varied_tiny_model(), SOURCE, **settings)


def loop_graph_ops(**settings):
    """Op types inside the beam search's while loop body."""
    model = varied_tiny_model()
    traced = tf.function(lambda ids: decoding.beam_search_graph(model, ids, **settings)).get_concrete_function(
        tf.TensorSpec([None, None], tf.int32))
    library = traced.graph.as_graph_def().library.function
    return {node.op for f in library if "while_body" in f.signature.name for node in f.node_def}


def test_off_adds_no_operation_so_results_are_unchanged_to_the_bit():
    assert guards.make_guard(0, 1.0) is None
    assert "ScatterNd" not in loop_graph_ops(no_repeat_ngram_size=0, repetition_penalty=1.0)
    assert "ScatterNd" in loop_graph_ops(repetition_penalty=1.2)  # what a guard adds
    model = varied_tiny_model()
    off = decoding.beam_search(model, SOURCE, n_best=2, no_repeat_ngram_size=0, repetition_penalty=1.0)
    default = decoding.beam_search(model, SOURCE, n_best=2)
    np.testing.assert_array_equal(off.ids, default.ids)
    np.testing.assert_array_equal(off.scores, default.scores)


def ngrams(row, n):
    """The n-grams of an output row, up to its EOS (a random model may produce PAD ids before it)."""
    tokens = [int(t) for t in row]
    tokens = tokens[: tokens.index(EOS_ID)] if EOS_ID in tokens else tokens
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


def looping_logits(ids, cache, step):
    """A model that always prefers token 4, then 5, then 6: without a guard it loops."""
    logits = tf.constant([-9.0, -9.0, -9.0, -3.0, 2.0, 1.0, 0.5, -1.0], tf.float32)
    return tf.tile(logits[None, :], [tf.shape(ids)[0], 1]), cache


NO_CACHE = StepCache(beams=[], sentences=[])


@pytest.mark.parametrize("n", [1, 2, 3])
def test_no_output_repeats_an_n_gram_of_the_blocked_size(n):
    limits = tf.constant([12, 12])
    for run in (lambda guard: search.sequential_decode(looping_logits, NO_CACHE, limits, tf.constant(12),
                                                       search.arg_max, guard=guard),
                lambda guard: search.beam_decode(looping_logits, NO_CACHE, 3, 0.0, limits, tf.constant(12),
                                                 n_best=3, guard=guard)):
        unguarded = tf.function(lambda: run(None))().ids.numpy()
        assert any(len(set(ngrams(row, n))) < len(ngrams(row, n)) for row in unguarded.reshape(-1, 12))
        guarded = tf.function(lambda: run(guards.make_guard(no_repeat_ngram_size=n)))().ids.numpy()
        for row in guarded.reshape(-1, 12):
            assert len(set(ngrams(row, n))) == len(ngrams(row, n)), (n, row)


@pytest.mark.parametrize("name", ["greedy", "beam", "sample"])
def test_every_search_of_a_model_keeps_the_n_gram_rule(name):
    model = varied_tiny_model()
    settings = {"no_repeat_ngram_size": 2}
    result = {"greedy": lambda: decoding.greedy_search(model, SOURCE, **settings),
              "beam": lambda: decoding.beam_search(model, SOURCE, n_best=3, **settings),
              "sample": lambda: decoding.sample_search(model, SOURCE, seed=2, **settings)}[name]()
    ids = np.asarray(result.ids)
    for row in ids.reshape(-1, ids.shape[-1]):
        assert len(set(ngrams(row, 2))) == len(ngrams(row, 2))


def test_the_penalty_makes_repeated_tokens_rarer():
    model = varied_tiny_model()

    def repeats(ids):
        return sum(len(row) - len(set(row)) for row in (
            [int(t) for t in r if t not in (PAD_ID, EOS_ID)] for r in np.asarray(ids).reshape(-1, ids.shape[-1])))

    plain = decoding.greedy_search(model, SOURCE).ids
    penalised = decoding.greedy_search(model, SOURCE, repetition_penalty=3.0).ids
    assert repeats(penalised) < repeats(plain)
