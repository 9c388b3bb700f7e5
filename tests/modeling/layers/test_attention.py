import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer.modeling.layers import MultiHeadAttention
from tests.conftest import assert_round_trips, functional_wrapper


def reference_attention(layer, query, value, mask=None):
    """softmax(Q K^T / sqrt(d_k)) V per head, in NumPy, with the layer's weights."""
    wq, bq = [np.asarray(w) for w in layer.query_dense.weights]
    wk, bk = [np.asarray(w) for w in layer.key_dense.weights]
    wv, bv = [np.asarray(w) for w in layer.value_dense.weights]
    wo, bo = [np.asarray(w) for w in layer.output_dense.weights]
    h, k = layer.num_heads, layer.key_dim

    def heads(x):  # (B, L, H*K) -> (B, H, L, K)
        return x.reshape(x.shape[0], x.shape[1], h, k).transpose(0, 2, 1, 3)

    q, kk, v = heads(query @ wq + bq), heads(value @ wk + bk), heads(value @ wv + bv)
    logits = q @ kk.transpose(0, 1, 3, 2) / np.sqrt(k)  # (B, H, T, S)
    if mask is not None:
        logits = np.where(mask[:, None], logits, -np.inf)
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = (p @ v).transpose(0, 2, 1, 3).reshape(query.shape[0], query.shape[1], h * k)
    return out @ wo + bo, p


def make_inputs(seed=0, batch=2, t=5, s=7, d=16):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(batch, t, d)).astype("float32"),
            rng.normal(size=(batch, s, d)).astype("float32"))


def test_matches_the_formula_with_a_padding_mask():
    query, value = make_inputs()
    mask = np.ones((2, 5, 7), bool)
    mask[1, :, 4:] = False  # second sequence has 4 real keys
    layer = MultiHeadAttention(num_heads=4, key_dim=4)
    out, scores = layer.call_with_scores(query, value, attention_mask=mask)
    np.testing.assert_array_equal(layer(query, value, attention_mask=mask), out)  # `call`: the output alone
    ref_out, ref_p = reference_attention(layer, query, value, mask)
    np.testing.assert_allclose(out, ref_out, atol=1e-5)
    np.testing.assert_allclose(scores, ref_p, atol=1e-6)
    assert float(np.max(np.asarray(scores)[1, :, :, 4:])) == 0.0


def test_is_a_drop_in_replacement_for_keras_multi_head_attention():
    query, value = make_inputs(1)
    ours = MultiHeadAttention(num_heads=4, key_dim=4)
    ours(query, value)
    theirs = keras.layers.MultiHeadAttention(num_heads=4, key_dim=4)
    theirs(query, value)
    h, k, d = 4, 4, 16
    # Keras keeps kernels as (D, H, K) and the output kernel as (H, K, D).
    theirs.set_weights([
        np.asarray(ours.query_dense.kernel).reshape(d, h, k), np.asarray(ours.query_dense.bias).reshape(h, k),
        np.asarray(ours.key_dense.kernel).reshape(d, h, k), np.asarray(ours.key_dense.bias).reshape(h, k),
        np.asarray(ours.value_dense.kernel).reshape(d, h, k), np.asarray(ours.value_dense.bias).reshape(h, k),
        np.asarray(ours.output_dense.kernel).reshape(h, k, d), np.asarray(ours.output_dense.bias),
    ])
    out_a, scores_a = ours.call_with_scores(query, query, use_causal_mask=True, training=False)
    out_b, scores_b = theirs(query, query, use_causal_mask=True, return_attention_scores=True, training=False)
    np.testing.assert_allclose(ours(query, query, use_causal_mask=True), out_b, atol=1e-5)
    np.testing.assert_allclose(out_a, out_b, atol=1e-5)
    np.testing.assert_allclose(scores_a, scores_b, atol=1e-6)


def test_causal_mask_hides_the_future():
    query, _ = make_inputs(2)
    layer = MultiHeadAttention(num_heads=2, key_dim=8)
    base = np.asarray(layer(query, query, use_causal_mask=True))
    changed = query.copy()
    changed[:, 3] += 5.0
    out = np.asarray(layer(changed, changed, use_causal_mask=True))
    np.testing.assert_allclose(out[:, :3], base[:, :3], atol=1e-6)
    assert np.abs(out[:, 3:] - base[:, 3:]).max() > 1e-3


def test_fully_masked_rows_stay_finite():
    query, value = make_inputs(3)
    layer = MultiHeadAttention(num_heads=2, key_dim=8)
    out = layer(query, value, attention_mask=np.zeros((2, 5, 7), bool))
    assert np.isfinite(np.asarray(out)).all()


def test_growing_cache_one_step_at_a_time_equals_the_full_causal_pass():
    query, _ = make_inputs(4, t=6)
    layer = MultiHeadAttention(num_heads=4, key_dim=4)
    full = np.asarray(layer(query, query, use_causal_mask=True))
    empty = ops.zeros((2, 4, 0, 4))
    cache = (empty, empty)
    for t in range(6):
        step = query[:, t:t + 1]
        keys, values = layer.compute_key_value(step)  # (B, H, 1, K)
        cache = (ops.concatenate([cache[0], keys], axis=2), ops.concatenate([cache[1], values], axis=2))
        out = layer(step, use_causal_mask=True, key_value=cache)  # the query is the cache's last position
        np.testing.assert_allclose(np.asarray(out)[:, 0], full[:, t], atol=1e-5)
    # Two new positions at once see each other causally.
    keys, values = layer.compute_key_value(query[:, :2])
    out = layer(query[:, 2:4], use_causal_mask=True, key_value=tuple(
        ops.concatenate([a, b], axis=2) for a, b in zip((keys, values), layer.compute_key_value(query[:, 2:4]))))
    np.testing.assert_allclose(np.asarray(out), full[:, 2:4], atol=1e-5)


def test_static_cache_equals_plain_cross_attention():
    query, value = make_inputs(5)
    layer = MultiHeadAttention(num_heads=4, key_dim=4)
    plain = layer(query, value)
    projected = layer.compute_key_value(value)
    cached = layer(query, None, key_value=projected)
    np.testing.assert_allclose(cached, plain, atol=1e-6)
    # Keys shared by G = 2 query rows: each key row serves two consecutive query rows.
    shared = layer(np.repeat(query, 2, axis=0), None, key_value=projected)
    np.testing.assert_allclose(shared, np.repeat(np.asarray(plain), 2, axis=0), atol=1e-6)


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_keeps_scores_float32(policy):
    query, value = make_inputs(6)
    layer = MultiHeadAttention(num_heads=4, key_dim=4, dtype=policy)
    out, scores = layer.call_with_scores(query, value)
    assert out.dtype == keras.DTypePolicy(policy).compute_dtype
    assert scores.dtype == "float32"
    np.testing.assert_allclose(np.asarray(ops.sum(scores, -1)), 1.0, atol=1e-5)


def test_round_trips(tmp_path):
    query, value = make_inputs(7)
    mask = np.ones((2, 5, 7), bool)
    mask[0, :, 5:] = False

    def build():
        layer = MultiHeadAttention(num_heads=4, key_dim=4, value_dim=2, dropout=0.1, name="mha")
        return functional_wrapper(
            layer,
            [((5, 16), "float32"), ((7, 16), "float32"), ((5, 7), "bool")],
            lambda l, q, v, m: l(q, v, attention_mask=m),
        )

    assert_round_trips(build, [query, value, mask], tmp_path)


def test_needs_a_value_or_projected_keys_and_values():
    query, _ = make_inputs()
    layer = MultiHeadAttention(num_heads=2, key_dim=8)
    layer(query, query)
    with pytest.raises(ValueError, match="value is required unless key_value is given"):
        layer(query)
