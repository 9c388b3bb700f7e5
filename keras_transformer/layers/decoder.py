"""The decoder layer and the decoder stack, with a key/value cache (section 3.1).

Notation: B batch, T target length (1 per step when decoding with a cache),
S source length, L cache length (maximum output length), D model width,
H heads, K per-head width.

A decoder cache is a list with one dict per layer:
    {"self": (keys, values), "cross": (keys, values)}
with self-attention entries of shape (B, H, L, K), zero-filled and written one
step at a time, and cross-attention entries of shape (B, H, S, K), projected
from the encoder output once by `Decoder.init_cache`. The structure has a
fixed shape, so it can be carried through `tf.while_loop`.
"""

import keras
from keras import ops

from keras_transformer.layers.encoder import _StackBase, _TransformerLayerBase
from keras_transformer.layers.residual import residual_block


@keras.saving.register_keras_serializable(package="keras_transformer")
class DecoderLayer(_TransformerLayerBase):
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
        encoder_output: (B, S, D). Unused when `cache` is given.
        self_attention_mask: bool, broadcastable to (B, T, T), or (B, T, L)
            with a cache. It must include the causal part.
        cross_attention_mask: bool, broadcastable to (B, T, S).
        cache: this layer's cache dict (see the module docstring).
        cache_update_index: int scalar; the position of `x[:, 0]`.
        return_attention_scores: bool. Also return the (B, H, T, S)
            encoder-decoder attention probabilities.
        training: bool.

    Returns:
        `x`, plus the cross-attention scores if asked for, plus the updated
        cache if one was given, in that order.

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

    def call(
        self,
        x,
        encoder_output=None,
        self_attention_mask=None,
        cross_attention_mask=None,
        cache=None,
        cache_update_index=None,
        return_attention_scores=False,
        training=None,
    ):
        if cache is None and encoder_output is None:
            raise ValueError("DecoderLayer needs encoder_output or a cache.")
        self_cache = None if cache is None else cache["self"]
        cross_cache = None if cache is None else cache["cross"]

        x, extras = residual_block(
            x,
            lambda y: self.self_attention(
                y,
                y,
                attention_mask=self_attention_mask,
                cache=self_cache,
                cache_update_index=None if cache is None else cache_update_index,
                training=training,
            ),
            self.self_attention_norm,
            self.self_attention_dropout,
            self.norm_first,
            training,
        )  # (B, T, D)
        if cache is not None:
            (self_cache,) = extras

        x, extras = residual_block(
            x,
            lambda y: self.cross_attention(
                y,
                encoder_output,
                attention_mask=cross_attention_mask,
                return_attention_scores=True,
                cache=cross_cache,
                training=training,
            ),
            self.cross_attention_norm,
            self.cross_attention_dropout,
            self.norm_first,
            training,
        )  # (B, T, D)
        scores = extras[0]  # (B, H, T, S)

        x = self._feed_forward_block(x, training)  # (B, T, D)
        results = (x,)
        if return_attention_scores:
            results += (scores,)
        if cache is not None:
            results += ({"self": self_cache, "cross": cross_cache},)
        return results[0] if len(results) == 1 else results


@keras.saving.register_keras_serializable(package="keras_transformer")
class Decoder(_StackBase):
    """A stack of `num_layers` DecoderLayers, with an incremental-decoding cache.

    Args:
        num_layers: int. N (6 in the paper).
        d_model, num_heads, d_ff, dropout, attention_dropout,
        activation_dropout, norm_first, layer_norm_epsilon: as in
            `DecoderLayer`; `dropout` also applies to the input embeddings.
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        x: (B, T, D) embedded target.
        encoder_output: (B, S, D). Unused when `cache` is given.
        self_attention_mask, cross_attention_mask, cache_update_index,
        return_attention_scores, training: as in `DecoderLayer`.
        cache: the list of per-layer dicts made by `init_cache`.

    Returns:
        `x` (B, T, D), plus a list of per-layer (B, H, T, S) cross-attention
        scores if asked for, plus the updated cache if one was given.

    Example:
    >>> decoder = Decoder(num_layers=2, d_model=8, num_heads=2, d_ff=16)
    >>> decoder(keras.ops.ones((1, 3, 8)), keras.ops.ones((1, 4, 8))).shape
    (1, 3, 8)
    """

    layer_class = DecoderLayer

    def build(self, x_shape, encoder_output_shape=None):
        self._build_stack(x_shape, encoder_output_shape)

    def init_cache(self, encoder_output, max_length):
        """An empty self-attention cache of length `max_length` per layer, and
        the cross-attention keys/values projected from `encoder_output` once."""
        batch = ops.shape(encoder_output)[0]
        head_dim = self.d_model // self.num_heads
        cache = []
        for block in self.blocks:
            empty = ops.zeros((batch, self.num_heads, max_length, head_dim), dtype=self.compute_dtype)
            cross = block.cross_attention.compute_key_value(encoder_output)  # 2 x (B, H, S, K)
            cache.append({"self": (empty, empty), "cross": cross})
        return cache

    def call(
        self,
        x,
        encoder_output=None,
        self_attention_mask=None,
        cross_attention_mask=None,
        cache=None,
        cache_update_index=None,
        return_attention_scores=False,
        training=None,
    ):
        x = self.input_dropout(x, training=training)
        all_scores, new_cache = [], []
        for i, block in enumerate(self.blocks):
            outputs = block(
                x,
                encoder_output,
                self_attention_mask=self_attention_mask,
                cross_attention_mask=cross_attention_mask,
                cache=None if cache is None else cache[i],
                cache_update_index=cache_update_index,
                return_attention_scores=return_attention_scores,
                training=training,
            )
            if not isinstance(outputs, tuple):
                outputs = (outputs,)
            x = outputs[0]  # (B, T, D)
            if return_attention_scores:
                all_scores.append(outputs[1])
            if cache is not None:
                new_cache.append(outputs[-1])
        results = (self._finish(x),)
        if return_attention_scores:
            results += (all_scores,)
        if cache is not None:
            results += (new_cache,)
        return results[0] if len(results) == 1 else results
