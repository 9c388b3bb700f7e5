"""The decoder layer and the decoder stack, with a growing key/value cache (section 3.1).

Notation: B batch, T target length (1 per step when decoding with a cache),
S source length, L positions decoded so far, D model width, H heads,
K per-head width.

A decoder cache is a list with one dict per layer:
    {"self": (keys, values), "cross": (keys, values)}
with self-attention entries of shape (B, H, L, K), holding exactly the
positions decoded so far (`decode_next` appends T positions), and
cross-attention entries of shape (B', H, S, K), projected from the encoder
output once by `Decoder.init_cache` (B' may be B/G: see
`MultiHeadAttention`). A step's attention then costs what the output so far
costs, not what the longest possible output would.
"""

import keras
from keras import ops

from keras_transformer.modeling.layers.encoder import _StackBase, _TransformerLayerBase
from keras_transformer.modeling.layers.residual import residual_block


class _DecoderCalls:
    """The three ways to run a decoder layer or stack, each with one return type.

    Subclasses implement `_run(x, encoder_output, self_attention_mask,
    cross_attention_mask, cache, training, with_scores)` -> (x,
    cross-attention scores or None, grown cache or None).
    """

    def call(self, x, encoder_output=None, self_attention_mask=None, cross_attention_mask=None, training=None):
        x, _, _ = self._run(x, encoder_output, self_attention_mask, cross_attention_mask, None, training, False)
        return x  # (B, T, D)

    def decode_next(self, x, cache, self_attention_mask=None, cross_attention_mask=None, training=None):
        """(x (B, T, D), the cache grown by T positions) for the T tokens that
        follow the cache's (see the module docstring)."""
        x, _, cache = self._run(x, None, self_attention_mask, cross_attention_mask, cache, training, False)
        return x, cache

    def call_with_attention(self, x, encoder_output, self_attention_mask=None, cross_attention_mask=None,
                            training=None):
        """(x (B, T, D), the encoder-decoder attention probabilities: (B, H, T, S) for a
        layer, a list of them, one per layer, for the stack)."""
        x, scores, _ = self._run(x, encoder_output, self_attention_mask, cross_attention_mask, None, training, True)
        return x, scores


@keras.saving.register_keras_serializable(package="keras_transformer")
class DecoderLayer(_DecoderCalls, _TransformerLayerBase):
    """Masked self-attention, encoder-decoder attention and a feed-forward network.

    Each sub-layer sits in a post-norm residual block as in the paper,
    x = LayerNorm(x + Dropout(Sublayer(x))), or pre-norm with `norm_first`.

    Args:
        d_model, num_heads, d_ff, dropout, attention_dropout,
        activation_dropout, norm_first, layer_norm_epsilon: as in
            `EncoderLayer`.
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        x: (B, T, D) embedded target.
        encoder_output: (B, S, D).
        self_attention_mask: bool, broadcastable to (B, T, T). It must
            include the causal part.
        cross_attention_mask: bool, broadcastable to (B, T, S).
        training: bool.

    Returns:
        `x` (B, T, D). Each use has its own method with one return type:
        `call` for the full pass, `decode_next(x, cache, ...)` -> (x, grown
        cache) for incremental decoding with this layer's cache dict (see the
        module docstring; the self-attention mask is then (B, T, L + T), or
        None for one token), and `call_with_attention(...)` -> (x, (B, H, T,
        S) encoder-decoder attention probabilities).

    Example:
    >>> layer = DecoderLayer(d_model=8, num_heads=2, d_ff=16)
    >>> layer(keras.ops.ones((2, 3, 8)), keras.ops.ones((2, 5, 8))).shape
    (2, 3, 8)

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 3.1.
    """

    def build(self, x_shape, encoder_output_shape=None):
        encoder_output_shape = x_shape if encoder_output_shape is None else encoder_output_shape
        self.self_attention = self._attention("self_attention")
        self.self_attention.build(x_shape, x_shape)
        self.self_attention_norm = self._norm("self_attention_norm")
        self.self_attention_norm.build(x_shape)
        self.self_attention_dropout = self._dropout()
        self.cross_attention = self._attention("cross_attention")
        self.cross_attention.build(x_shape, encoder_output_shape)
        self.cross_attention_norm = self._norm("cross_attention_norm")
        self.cross_attention_norm.build(x_shape)
        self.cross_attention_dropout = self._dropout()
        self._build_feed_forward(x_shape)
        self.built = True

    def _run(self, x, encoder_output, self_attention_mask, cross_attention_mask, cache, training, with_scores):
        """The layer, once: (x, cross-attention scores or None, grown cache or None)."""
        if cache is None and encoder_output is None:
            raise ValueError("DecoderLayer needs encoder_output or a cache.")

        def self_attention(y):
            if cache is None:
                return self.self_attention(y, y, attention_mask=self_attention_mask, training=training), None
            keys, values = self.self_attention.compute_key_value(y)  # (B, H, T, K)
            grown = (ops.concatenate([cache["self"][0], keys], axis=2),  # (B, H, L + T, K)
                     ops.concatenate([cache["self"][1], values], axis=2))
            out = self.self_attention(y, attention_mask=self_attention_mask, key_value=grown, training=training)
            return out, grown

        x, grown = residual_block(x, self_attention, self.self_attention_norm, self.self_attention_dropout,
                                  self.norm_first, training)  # (B, T, D)

        def cross_attention(y):
            kwargs = {"attention_mask": cross_attention_mask, "training": training,
                      "key_value": None if cache is None else cache["cross"]}
            if with_scores:
                return self.cross_attention.call_with_scores(y, encoder_output, **kwargs)  # (B, H, T, S) scores
            return self.cross_attention(y, encoder_output, **kwargs), None

        x, scores = residual_block(x, cross_attention, self.cross_attention_norm, self.cross_attention_dropout,
                                   self.norm_first, training)  # (B, T, D)
        x = self._feed_forward_block(x, training)  # (B, T, D)
        return x, scores, None if cache is None else {"self": grown, "cross": cache["cross"]}


@keras.saving.register_keras_serializable(package="keras_transformer")
class Decoder(_DecoderCalls, _StackBase):
    """A stack of `num_layers` DecoderLayers, with an incremental-decoding cache.

    Args:
        num_layers: int. N (6 in the paper).
        d_model, num_heads, d_ff, dropout, attention_dropout,
        activation_dropout, norm_first, layer_norm_epsilon: as in
            `DecoderLayer`; `dropout` also applies to the input embeddings.
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        x: (B, T, D) embedded target.
        encoder_output: (B, S, D).
        self_attention_mask, cross_attention_mask, training: as in `DecoderLayer`.

    Returns:
        `x` (B, T, D). As in `DecoderLayer`, `decode_next(x, cache, ...)` ->
        (x, grown cache) decodes with the list of per-layer dicts made by
        `init_cache`, and `call_with_attention(...)`
        -> (x, list of per-layer (B, H, T, S) cross-attention scores).

    Example:
    >>> decoder = Decoder(num_layers=2, d_model=8, num_heads=2, d_ff=16)
    >>> decoder(keras.ops.ones((1, 3, 8)), keras.ops.ones((1, 4, 8))).shape
    (1, 3, 8)
    """

    layer_class = DecoderLayer

    def build(self, x_shape, encoder_output_shape=None):
        self._build_stack(x_shape, encoder_output_shape)

    def init_cache(self, encoder_output):
        """An empty cache for `decode_next`: no self-attention positions yet,
        and each layer's cross-attention keys/values projected from
        `encoder_output` (B, S, D) once."""
        batch = ops.shape(encoder_output)[0]
        head_dim = self.d_model // self.num_heads
        cache = []
        for block in self.blocks:
            empty = ops.zeros((batch, self.num_heads, 0, head_dim), dtype=self.compute_dtype)
            cross = block.cross_attention.compute_key_value(encoder_output)  # 2 x (B, H, S, K)
            cache.append({"self": (empty, empty), "cross": cross})
        return cache

    def _run(self, x, encoder_output, self_attention_mask, cross_attention_mask, cache, training, with_scores):
        x = self.input_dropout(x, training=training)
        all_scores, new_cache = [], []
        for i, block in enumerate(self.blocks):
            x, scores, layer_cache = block._run(x, encoder_output, self_attention_mask, cross_attention_mask,
                                                None if cache is None else cache[i], training, with_scores)
            all_scores.append(scores)  # (B, H, T, S)
            new_cache.append(layer_cache)
        return self._finish(x), all_scores if with_scores else None, None if cache is None else new_cache
