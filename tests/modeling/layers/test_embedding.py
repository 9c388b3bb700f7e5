import math

import numpy as np
import pytest

from keras_transformer.modeling.layers import PositionalEmbedding, sinusoidal_encoding
from tests.conftest import assert_round_trips, functional_wrapper


@pytest.mark.parametrize("pos,dim", [(0, 0), (0, 1), (1, 0), (7, 5), (50, 12), (999, 63), (123, 30)])
def test_sinusoids_match_the_paper(pos, dim):
    d_model = 64
    table = np.asarray(sinusoidal_encoding(np.arange(1000), d_model))
    i = dim // 2
    angle = pos / 10000 ** (2 * i / d_model)
    expected = math.sin(angle) if dim % 2 == 0 else math.cos(angle)
    assert table[pos, dim] == pytest.approx(expected, abs=2e-5)


def test_embedding_is_scaled_token_vector_plus_position():
    layer = PositionalEmbedding(vocab_size=20, d_model=8)
    ids = np.array([[5, 6, 0]])
    out = np.asarray(layer(ids))
    table = np.asarray(layer.embeddings)
    pe = np.asarray(sinusoidal_encoding(np.arange(3), 8))
    np.testing.assert_allclose(out[0], table[[5, 6, 0]] * math.sqrt(8) + pe, atol=1e-6)


def test_start_index_offsets_positions():
    layer = PositionalEmbedding(vocab_size=20, d_model=8)
    ids = np.array([[3, 4, 5, 6, 7]])
    full = np.asarray(layer(ids))
    for t in range(5):
        step = np.asarray(layer(ids[:, t:t + 1], start_index=t))
        np.testing.assert_allclose(step[:, 0], full[:, t], atol=1e-6)


def test_attend_is_the_transposed_embedding_projection():
    layer = PositionalEmbedding(vocab_size=20, d_model=8)
    layer(np.array([[1]]))
    x = np.random.default_rng(0).normal(size=(2, 3, 8)).astype("float32")
    np.testing.assert_allclose(layer.attend(x), x @ np.asarray(layer.embeddings).T, atol=1e-5)


def test_rejects_odd_width():
    with pytest.raises(ValueError, match="even.*got 7"):
        PositionalEmbedding(vocab_size=10, d_model=7)


def test_round_trips(tmp_path):
    ids = np.array([[4, 9, 0], [1, 2, 3]], "int32")

    def build():
        return functional_wrapper(
            PositionalEmbedding(vocab_size=12, d_model=8, name="embed"),
            [((3,), "int32")],
        )

    assert_round_trips(build, ids, tmp_path)
