import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import top_k as chunked
from keras_transformer.decoding.sampling import NEG_INF

RNG = np.random.default_rng(11)


def assert_same_as_tf(values, k, jit_compile=False):
    values = tf.constant(values, tf.float32)
    run = tf.function(lambda x: chunked.top_k(x, k), jit_compile=jit_compile,
                      input_signature=[tf.TensorSpec([None, values.shape[1]], tf.float32)])
    got_values, got_indices = run(values)
    want_values, want_indices = tf.math.top_k(values, k=k)
    np.testing.assert_array_equal(got_values.numpy(), want_values.numpy())
    np.testing.assert_array_equal(got_indices.numpy(), want_indices.numpy())


@pytest.mark.parametrize("length, k", [(4 * 8000, 8), (4 * 37000, 8), (2 * 500, 2), (640, 8), (160, 8)])
def test_equals_tf_top_k_on_beam_search_rows(length, k):
    assert chunked.chunk_size(length, k) is not None  # the chunked path runs, not the fallback
    assert_same_as_tf(RNG.normal(size=(5, length)), k)


@pytest.mark.parametrize("levels", [2, 5, 60, 100, 200])
def test_ties_break_to_the_lower_index_as_in_tf_top_k(levels):
    """Few distinct values: chunks tie on their maxima, and the k-th best value
    ties across picked chunks whose maxima differ."""
    assert_same_as_tf(RNG.integers(0, levels, size=(40, 4 * 160)).astype(np.float32), 8)


def test_a_tie_across_chunks_goes_to_the_earlier_chunk_even_if_its_maximum_is_lower():
    row = np.zeros((1, 640), np.float32)
    row[0, 3] = 9.0  # chunk 0: maximum 9
    row[0, 20], row[0, 21] = 10.0, 9.0  # chunk 1: maximum 10, and a 9 at a higher index than chunk 0's
    values, indices = tf.function(lambda x: chunked.top_k(x, 2))(tf.constant(row))
    np.testing.assert_array_equal(indices.numpy(), [[20, 3]])
    assert_same_as_tf(row, 2)


def test_all_winners_in_one_chunk_or_at_the_row_ends():
    rows = np.full((3, 1024), -5.0, np.float32)
    rows[0, 64:72] = np.arange(8, 0, -1)  # the 8 best fill one chunk
    rows[1, :4], rows[1, -4:] = 3.0, 3.0  # the first and the last chunk
    rows[2, :] = NEG_INF  # a dead beam's row: all equal
    assert_same_as_tf(rows, 8)


def test_masked_candidates_of_beams_not_yet_alive():
    """Step 0 of beam search: beams 1..K-1 carry NEG_INF before their log-probabilities."""
    log_probs = np.log(RNG.dirichlet(np.ones(500), size=(2, 4))).astype(np.float32)  # (B, K, V)
    log_probs[:, 1:] += NEG_INF
    assert_same_as_tf(log_probs.reshape(2, 4 * 500), 8)


def test_xla_compiles_it_to_the_same_result():
    assert_same_as_tf(RNG.normal(size=(4, 4 * 1000)), 8, jit_compile=True)


@pytest.mark.parametrize("length, k", [(1009, 8), (40, 8), (24, 2)])
def test_rows_without_a_chunk_size_fall_back_to_tf_top_k(length, k):
    """A prime length has no divisor to cut it into chunks; short rows have
    too few chunks of more than one element."""
    assert chunked.chunk_size(length, k) is None
    assert_same_as_tf(RNG.normal(size=(3, length)), k)


def test_a_row_length_unknown_when_tracing_falls_back_to_tf_top_k():
    values = RNG.normal(size=(2, 640)).astype(np.float32)
    run = tf.function(lambda x: chunked.top_k(x, 8), input_signature=[tf.TensorSpec([None, None], tf.float32)])
    got = run(values)
    want = tf.math.top_k(values, k=8)
    np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())


def test_chunk_size_divides_the_row_and_prefers_64():
    assert chunked.chunk_size(4 * 8000, 8) == 64
    assert chunked.chunk_size(4 * 37000, 8) == 74  # 148,000 has no divisor 64; 74 is the nearest
    assert chunked.chunk_size(4 * 31999, 8) == 44  # 4 * 11 * 2909
