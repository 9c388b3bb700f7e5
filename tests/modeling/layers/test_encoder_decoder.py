"""EncoderLayer, DecoderLayer, FeedForward and the two stacks."""

import numpy as np
import pytest

from keras_transformer.modeling import masks
from keras_transformer.modeling.layers import Decoder, DecoderLayer, Encoder, EncoderLayer, FeedForward
from tests.conftest import assert_round_trips, functional_wrapper

D, H, F = 16, 4, 32
RNG = np.random.default_rng(0)
X = RNG.normal(size=(2, 5, D)).astype("float32")
MEMORY = RNG.normal(size=(2, 7, D)).astype("float32")


def test_feed_forward_is_relu_mlp():
    ffn = FeedForward(d_model=D, d_ff=F)
    out = np.asarray(ffn(X))
    w1, b1, w2, b2 = [np.asarray(w) for w in ffn.weights]
    np.testing.assert_allclose(out, np.maximum(X @ w1 + b1, 0) @ w2 + b2, atol=1e-5)


def test_post_norm_encoder_layer_is_layernorm_of_residual_sums():
    layer = EncoderLayer(d_model=D, num_heads=H, d_ff=F)
    out = np.asarray(layer(X))
    # Paper's post-norm: recompute LayerNorm(x + Sublayer(x)) twice by hand.
    def norm(v, ln):
        gamma, beta = [np.asarray(w) for w in ln.weights]
        mu, var = v.mean(-1, keepdims=True), v.var(-1, keepdims=True)
        return (v - mu) / np.sqrt(var + 1e-6) * gamma + beta
    h = norm(X + np.asarray(layer.self_attention(X, X)), layer.self_attention_norm)
    expected = norm(h + np.asarray(layer.feed_forward(h)), layer.feed_forward_norm)
    np.testing.assert_allclose(out, expected, atol=1e-4)


def test_pre_norm_encoder_layer_adds_to_the_raw_residual():
    layer = EncoderLayer(d_model=D, num_heads=H, d_ff=F, norm_first=True)
    out = np.asarray(layer(X))
    h = X + np.asarray(layer.self_attention(layer.self_attention_norm(X), layer.self_attention_norm(X)))
    expected = h + np.asarray(layer.feed_forward(layer.feed_forward_norm(h)))
    np.testing.assert_allclose(out, expected, atol=1e-4)


def test_pre_norm_stack_ends_with_a_layer_norm():
    encoder = Encoder(num_layers=2, d_model=D, num_heads=H, d_ff=F, norm_first=True)
    out = np.asarray(encoder(X))
    np.testing.assert_allclose(out.mean(-1), 0.0, atol=1e-4)
    assert encoder.final_norm is not None
    post_norm = Encoder(num_layers=2, d_model=D, num_heads=H, d_ff=F)
    post_norm(X)
    assert post_norm.final_norm is None


def test_dropout_rates_are_separate():
    layer = EncoderLayer(d_model=D, num_heads=H, d_ff=F, dropout=0.3, attention_dropout=0.2)
    layer(X)
    assert layer.self_attention.dropout == 0.2
    assert layer.self_attention_dropout.rate == 0.3
    assert layer.feed_forward_dropout.rate == 0.3
    # Dropout is active in training and off at inference.
    assert not np.allclose(layer(X, training=True), layer(X, training=False))
    np.testing.assert_allclose(layer(X, training=False), layer(X, training=False))


def test_decoder_cache_steps_equal_the_full_pass():
    decoder = Decoder(num_layers=2, d_model=D, num_heads=H, d_ff=F)
    source_mask = np.ones((2, 1, 7), bool)
    source_mask[1, :, 5:] = False
    full = np.asarray(decoder(X, MEMORY, self_attention_mask=masks.causal_mask(5, 5),
                              cross_attention_mask=source_mask))
    cache = decoder.init_cache(MEMORY)
    for t in range(5):
        out, cache = decoder.decode_next(X[:, t:t + 1], cache, cross_attention_mask=source_mask)
        np.testing.assert_allclose(np.asarray(out)[:, 0], full[:, t], atol=1e-5)
        assert all(tuple(layer["self"][0].shape) == (2, H, t + 1, D // H) for layer in cache)  # grown by one


def test_decoder_returns_cross_attention_scores_per_layer():
    decoder = Decoder(num_layers=3, d_model=D, num_heads=H, d_ff=F)
    source_mask = np.ones((2, 1, 7), bool)
    source_mask[0, :, 3:] = False
    full = decoder(X, MEMORY, cross_attention_mask=source_mask)
    out, scores = decoder.call_with_attention(X, MEMORY, cross_attention_mask=source_mask)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(full))  # the same pass, scores kept
    assert len(scores) == 3
    for s in scores:
        assert tuple(s.shape) == (2, H, 5, 7)
        np.testing.assert_allclose(np.asarray(s).sum(-1), 1.0, atol=1e-5)
        assert np.asarray(s)[0, :, :, 3:].max() == 0.0


def test_bad_widths_name_the_values():
    with pytest.raises(ValueError, match=r"d_model=30, num_heads=8.*Valid num_heads"):
        EncoderLayer(d_model=30, num_heads=8, d_ff=64)
    with pytest.raises(ValueError, match="dropout must be in"):
        DecoderLayer(d_model=32, num_heads=8, d_ff=64, dropout=1.5)
    with pytest.raises(ValueError, match="num_layers must be at least 1; got 0"):
        Decoder(num_layers=0, d_model=32, num_heads=8, d_ff=64)


@pytest.mark.parametrize("kind", ["encoder_layer", "decoder_layer", "encoder", "decoder", "feed_forward"])
def test_round_trips(kind, tmp_path):
    kwargs = dict(d_model=D, num_heads=H, d_ff=F, dropout=0.1, attention_dropout=0.05, norm_first=True)
    specs = [((5, D), "float32"), ((7, D), "float32")]

    def build():
        if kind == "encoder_layer":
            return functional_wrapper(EncoderLayer(**kwargs), specs[:1])
        if kind == "encoder":
            return functional_wrapper(Encoder(num_layers=2, **kwargs), specs[:1])
        if kind == "feed_forward":
            return functional_wrapper(FeedForward(d_model=D, d_ff=F, activation_dropout=0.1), specs[:1])
        layer = DecoderLayer(**kwargs) if kind == "decoder_layer" else Decoder(num_layers=2, **kwargs)
        return functional_wrapper(layer, specs, lambda l, x, m: l(x, m, self_attention_mask=masks.causal_mask(5, 5)))

    inputs = [X] if kind in ("encoder_layer", "encoder", "feed_forward") else [X, MEMORY]
    assert_round_trips(build, inputs, tmp_path, atol=1e-5)
