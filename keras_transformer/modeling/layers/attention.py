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

    The call signature follows `keras.layers.MultiHeadAttention`'s and `call`
    returns the output alone; `call_with_scores` also returns the attention
    probabilities. On top of that, the layer takes keys and values projected
    beforehand (`key_value`, from `compute_key_value`), for incremental
    decoding:

    - cross-attention: the encoder output is projected once per sentence.
      `key_value` may then have fewer rows than `query`, each of its rows
      serving G consecutive query rows (a sentence's G beams in beam
      search): `attention_mask` has the key rows too, and each sentence's
      keys and values are read once for all its beams, not once per beam.
    - self-attention over a growing cache: the decoder layer projects the
      new positions' keys and values, appends them to the cache, and passes
      the whole cache as `key_value`.

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
        value: (B, S, D) tensor. Unused with `key_value`.
        key: (B, S, D) tensor; defaults to `value`.
        attention_mask: boolean tensor broadcastable to (B, T, S); True means
            the query may attend to that key.
        use_causal_mask: bool. Also hide keys after each query's position
            (as Keras does; with `key_value`, the queries are its last T
            positions).
        training: bool. Enables dropout.
        key_value: tuple (keys, values) of shape (B, H, S, K) and (B, H, S, V),
            already projected; they may have B/G rows (see above).

    Returns:
        `output` (B, T, D); `call_with_scores` returns `(output, scores)`,
        with the (B, H, T, S) float32 attention probabilities.

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
        """Projects keys and values, for `key_value`.

        (B, S, D) -> ((B, H, S, K), (B, H, S, V)).
        """
        key = value if key is None else key
        keys = self._split_heads(self.key_dense(key), self.key_dim)  # (B, H, S, K)
        values = self._split_heads(self.value_dense(value), self.value_dim)  # (B, H, S, V)
        return keys, values

    def call(self, query, value=None, key=None, attention_mask=None, use_causal_mask=False, training=None,
             key_value=None):
        output, _ = self._run(query, value, key, attention_mask, use_causal_mask, training, key_value)
        return output  # (B, T, D)

    def call_with_scores(self, query, value=None, key=None, attention_mask=None, use_causal_mask=False,
                         training=None, key_value=None):
        """`(output (B, T, D), scores (B, H, T, S) float32)`: `call`'s output and
        the attention probabilities. Call it on a built layer, with inputs in
        its compute dtype (as a parent layer's `call` has them)."""
        if not self.built:
            self.build(ops.shape(query), None if value is None else ops.shape(value),
                       None if key is None else ops.shape(key))
        return self._run(query, value, key, attention_mask, use_causal_mask, training, key_value)

    def _run(self, query, value, key, attention_mask, use_causal_mask, training, key_value):
        queries = self.query_dense(query)  # (B, T, H*K)
        projected = key_value is not None
        if not projected:
            if value is None:
                raise ValueError("value is required unless key_value is given.")
            key_value = self.compute_key_value(value, key)
        keys, values = key_value  # (B', H, S, K), (B', H, S, V)

        mask = attention_mask
        if use_causal_mask:
            query_length, key_length = ops.shape(queries)[1], ops.shape(keys)[2]
            offset = key_length - query_length if projected else 0  # a cache's queries are its last positions
            mask = masks.merge_masks(mask, masks.causal_mask(query_length, key_length, offset))

        if projected:  # keys and values maybe shared by G query rows
            output, scores = self._attend_shared(queries, keys, values, mask, training)  # (B, T, H*V)
        else:
            queries = self._split_heads(queries, self.key_dim)  # (B, H, T, K)
            output, scores = self._attend(queries, keys, values, mask, training)  # (B, H, T, V), (B, H, T, S)
            batch, length = ops.shape(output)[0], ops.shape(output)[2]
            output = ops.transpose(output, (0, 2, 1, 3))  # (B, T, H, V)
            output = ops.reshape(output, (batch, length, self.num_heads * self.value_dim))  # (B, T, H*V)
        return self.output_dense(output), scores  # (B, T, D), (B, H, T, S)

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
