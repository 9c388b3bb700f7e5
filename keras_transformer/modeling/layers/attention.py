"""Multi-head scaled dot-product attention (paper sections 3.2.1 and 3.2.2).

Notation: B batch, T query length, S key/value length, D model width,
H heads, K per-head width (key_dim), V per-head value width (value_dim).
"""

import math

import keras
import numpy as np
from keras import ops

from keras_transformer.modeling import masks
from keras_transformer.modeling.layers.dense import Dense

# The masked logit: the most negative float32 (logits are float32 whatever the
# compute dtype), so exp() of it is exactly 0 and a fully masked row still
# gives a finite softmax.
FLOAT32_MIN = float(np.finfo(np.float32).min)


def clone_initializer(initializer):
    """A fresh copy, so sub-layers sharing one initializer argument draw different values."""
    return initializer.__class__.from_config(initializer.get_config())


@keras.saving.register_keras_serializable(package="keras_transformer")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head attention, softmax(Q K^T / sqrt(K)) V over H heads.

    The call signature matches `keras.layers.MultiHeadAttention`, so either
    layer can replace the other. On top of it, the layer takes a key/value
    cache for incremental decoding, in one of two modes:

    - static cache (`cache` given, `cache_update_index=None`): `cache` holds
      the projected keys and values, which are used as they are. This is
      cross-attention during decoding: the encoder output is projected once.
      The cache may have fewer rows than `query`, each of its rows serving G
      consecutive query rows (a sentence's G beams in beam search): then
      `attention_mask` has the cache's rows too, and each sentence's keys
      and values are read once for all its beams, not once per beam.
    - growing cache (`cache_update_index` given): keys and values of the new
      query positions are projected and written into `cache` at
      `cache_update_index`. This is decoder self-attention during decoding:
      the cache is allocated for the full output length up front, so the
      decoding loop keeps a fixed shape, and grows by one step per token.

    The attention logits and softmax are computed in float32 whatever the
    compute dtype; masked positions get the float32 minimum, never a literal.

    Args:
        num_heads: int. Number of attention heads H.
        key_dim: int. Width K of each head's queries and keys.
        value_dim: int. Width of each head's values; defaults to `key_dim`.
        dropout: float. Dropout rate on the attention probabilities.
        use_bias: bool. Whether the projections have biases.
        kernel_initializer: initializer of the projection kernels.
        bias_initializer: initializer of the projection biases.
        **kwargs: passed to `keras.layers.Layer` (name, dtype, ...).

    Call arguments:
        query: (B, T, D) tensor.
        value: (B, S, D) tensor. Unused with a static cache.
        key: (B, S, D) tensor; defaults to `value`.
        attention_mask: boolean tensor broadcastable to (B, T, S); True means
            the query may attend to that key.
        use_causal_mask: bool. Also hide keys after each query's position.
        return_attention_scores: bool. Also return the (B, H, T, S)
            attention probabilities.
        training: bool. Enables dropout.
        cache: tuple (keys, values) of shape (B, H, S, K) and (B, H, S, V);
            a static cache may have B/G rows instead (see above).
        cache_update_index: int scalar; where the new keys/values go.

    Returns:
        `output`, `(output, scores)`, `(output, cache)` or
        `(output, scores, cache)`, `output` being (B, T, D).

    Example:
    >>> layer = MultiHeadAttention(num_heads=2, key_dim=4)
    >>> x = keras.random.normal((3, 5, 8))
    >>> layer(x, x, use_causal_mask=True).shape
    (3, 5, 8)

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 3.2.
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        dropout=0.0,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if int(num_heads) < 1 or int(key_dim) < 1:
            raise ValueError(
                f"num_heads and key_dim must be positive; got num_heads={num_heads}, "
                f"key_dim={key_dim}."
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1); got {dropout}.")
        self.num_heads = int(num_heads)
        self.key_dim = int(key_dim)
        self.value_dim = int(value_dim) if value_dim else int(key_dim)
        self.dropout = dropout
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = False

    def _dense(self, units, name):
        return Dense(
            units,
            use_bias=self.use_bias,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name=name,
        )

    def build(self, query_shape, value_shape=None, key_shape=None):
        value_shape = query_shape if value_shape is None else value_shape
        key_shape = value_shape if key_shape is None else key_shape
        model_dim = query_shape[-1]
        self.query_dense = self._dense(self.num_heads * self.key_dim, "query")
        self.query_dense.build(query_shape)
        self.key_dense = self._dense(self.num_heads * self.key_dim, "key")
        self.key_dense.build(key_shape)
        self.value_dense = self._dense(self.num_heads * self.value_dim, "value")
        self.value_dense.build(value_shape)
        self.output_dense = self._dense(model_dim, "attention_output")
        self.output_dense.build(tuple(query_shape[:-1]) + (self.num_heads * self.value_dim,))
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.built = True

    def _split_heads(self, x, head_dim):
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        x = ops.reshape(x, (batch, length, self.num_heads, head_dim))  # (B, L, H, head_dim)
        return ops.transpose(x, (0, 2, 1, 3))  # (B, H, L, head_dim)

    def compute_key_value(self, value, key=None):
        """Projects keys and values once, for a static cross-attention cache.

        (B, S, D) -> ((B, H, S, K), (B, H, S, V)).
        """
        key = value if key is None else key
        keys = self._split_heads(self.key_dense(key), self.key_dim)  # (B, H, S, K)
        values = self._split_heads(self.value_dense(value), self.value_dim)  # (B, H, S, V)
        return keys, values

    def call(
        self,
        query,
        value=None,
        key=None,
        attention_mask=None,
        use_causal_mask=False,
        return_attention_scores=False,
        training=None,
        cache=None,
        cache_update_index=None,
    ):
        if cache_update_index is not None and cache is None:
            raise ValueError("cache_update_index was given without a cache.")
        queries = self.query_dense(query)  # (B, T, H*K)

        if cache is not None and cache_update_index is None:
            keys, values = cache  # static: already projected
        else:
            if value is None:
                raise ValueError("value is required unless a static cache is given.")
            keys, values = self.compute_key_value(value, key)  # (B, H, T|S, K|V)
            if cache is not None:
                start = (0, 0, cache_update_index, 0)
                keys = ops.slice_update(cache[0], start, keys)  # (B, H, S, K)
                values = ops.slice_update(cache[1], start, values)  # (B, H, S, V)
                cache = (keys, values)

        mask = attention_mask
        if use_causal_mask:
            query_length, key_length = ops.shape(queries)[1], ops.shape(keys)[2]
            offset = 0 if cache_update_index is None else cache_update_index
            mask = masks.merge_masks(mask, masks.causal_mask(query_length, key_length, offset))

        if cache is not None and cache_update_index is None:  # static keys, maybe shared by G query rows
            output, scores = self._attend_shared(queries, keys, values, mask, training)
        else:
            queries = self._split_heads(queries, self.key_dim)  # (B, H, T, K)
            output, scores = self._attend(queries, keys, values, mask, training)  # (B, H, T, V), (B, H, T, S)
            batch, length = ops.shape(output)[0], ops.shape(output)[2]
            output = ops.transpose(output, (0, 2, 1, 3))  # (B, T, H, V)
            output = ops.reshape(output, (batch, length, self.num_heads * self.value_dim))  # (B, T, H*V)
        output = self.output_dense(output)  # (B, T, D)

        results = (output,)
        if return_attention_scores:
            results += (scores,)
        if cache is not None:
            results += (cache,)
        return results[0] if len(results) == 1 else results

    def _attend_shared(self, queries, keys, values, mask, training):
        """Attention over static keys/values of R rows, each serving G = B/R
        consecutive query rows: each key row's G*T queries go through one
        matmul, so its keys and values are read once, not G times. The heads
        are split and merged with one transpose each, as in the ungrouped
        case; each logit is the dot product it would be there.

        (B, T, H*K) projected queries -> ((B, T, H*V), (B, H, T, S) scores).
        """
        batch, length = ops.shape(queries)[0], ops.shape(queries)[1]
        rows = ops.shape(keys)[0]
        group = batch // rows
        queries = ops.reshape(queries, (rows, group, length, self.num_heads, self.key_dim))
        queries = ops.transpose(queries, (0, 3, 1, 2, 4))  # (R, H, G, T, K)
        queries = ops.reshape(queries, (rows, self.num_heads, group * length, self.key_dim))
        output, scores = self._attend(queries, keys, values, mask, training)  # (R, H, G*T, V), (R, H, G*T, S)
        output = ops.reshape(output, (rows, self.num_heads, group, length, self.value_dim))
        output = ops.transpose(output, (0, 2, 3, 1, 4))  # (R, G, T, H, V)
        output = ops.reshape(output, (batch, length, self.num_heads * self.value_dim))  # (B, T, H*V)
        scores = ops.reshape(scores, (rows, self.num_heads, group, length, ops.shape(scores)[-1]))
        scores = ops.transpose(scores, (0, 2, 1, 3, 4))  # (R, G, H, T, S)
        scores = ops.reshape(scores, (batch, self.num_heads, length, ops.shape(scores)[-1]))  # (B, H, T, S)
        return output, scores

    def _attend(self, queries, keys, values, mask, training):
        queries = queries * ops.cast(1.0 / math.sqrt(self.key_dim), queries.dtype)
        logits = ops.matmul(queries, ops.swapaxes(keys, -1, -2))  # (B, H, T, S)
        logits = ops.cast(logits, "float32")
        if mask is not None:
            mask = ops.cast(mask, "bool")
            if len(mask.shape) == 3:
                mask = ops.expand_dims(mask, axis=1)  # (B, 1, T, S): same for every head
            logits = ops.where(mask, logits, FLOAT32_MIN)
        scores = ops.softmax(logits, axis=-1)  # (B, H, T, S), float32
        probs = self.dropout_layer(ops.cast(scores, self.compute_dtype), training=training)
        return ops.matmul(probs, values), scores  # (B, H, T, V)

    def compute_output_shape(self, query_shape, value_shape=None, key_shape=None):
        return query_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config
