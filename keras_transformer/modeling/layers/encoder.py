"""The encoder layer and the encoder stack (paper section 3.1).

Notation: B batch, S source length, D model width.
"""

import keras

from keras_transformer.modeling.layers.attention import MultiHeadAttention
from keras_transformer.modeling.layers.feed_forward import FeedForward
from keras_transformer.modeling.layers.residual import residual_block


def check_layer_dims(d_model, num_heads, d_ff):
    """Raises ValueError unless the widths make a valid Transformer layer."""
    if int(num_heads) < 1 or int(d_model) < 1 or int(d_ff) < 1:
        raise ValueError(
            f"d_model, num_heads and d_ff must be positive; got d_model={d_model}, "
            f"num_heads={num_heads}, d_ff={d_ff}."
        )
    if int(d_model) % int(num_heads):
        raise ValueError(
            f"d_model must be divisible by num_heads; got d_model={d_model}, "
            f"num_heads={num_heads}. Valid num_heads for this d_model: "
            f"{[h for h in range(1, int(d_model) + 1) if int(d_model) % h == 0 and h <= 64]}."
        )


class _TransformerLayerBase(keras.layers.Layer):
    """Arguments, checks and config shared by the encoder and decoder layers."""

    def __init__(
        self,
        d_model,
        num_heads,
        d_ff,
        dropout=0.1,
        attention_dropout=0.0,
        activation_dropout=0.0,
        norm_first=False,
        layer_norm_epsilon=1e-6,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_layer_dims(d_model, num_heads, d_ff)
        for name, rate in (
            ("dropout", dropout),
            ("attention_dropout", attention_dropout),
            ("activation_dropout", activation_dropout),
        ):
            if not 0.0 <= rate < 1.0:
                raise ValueError(f"{name} must be in [0, 1); got {rate}.")
        self.d_model = int(d_model)
        self.num_heads = int(num_heads)
        self.d_ff = int(d_ff)
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.activation_dropout = activation_dropout
        self.norm_first = bool(norm_first)
        self.layer_norm_epsilon = layer_norm_epsilon

    def _attention(self, name):
        return MultiHeadAttention(
            num_heads=self.num_heads,
            key_dim=self.d_model // self.num_heads,
            dropout=self.attention_dropout,
            dtype=self.dtype_policy,
            name=name,
        )

    def _norm(self, name):
        return keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )

    def _dropout(self):
        return keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)

    def _build_feed_forward(self, x_shape):
        self.feed_forward = FeedForward(
            self.d_model,
            self.d_ff,
            activation_dropout=self.activation_dropout,
            dtype=self.dtype_policy,
            name="feed_forward",
        )
        self.feed_forward.build(x_shape)
        self.feed_forward_norm = self._norm("feed_forward_norm")
        self.feed_forward_norm.build(x_shape)
        self.feed_forward_dropout = self._dropout()

    def _feed_forward_block(self, x, training):
        x, _ = residual_block(
            x,
            lambda y: (self.feed_forward(y, training=training), ()),
            self.feed_forward_norm,
            self.feed_forward_dropout,
            self.norm_first,
            training,
        )
        return x

    def compute_output_shape(self, x_shape, *args, **kwargs):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "d_model": self.d_model,
                "num_heads": self.num_heads,
                "d_ff": self.d_ff,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "activation_dropout": self.activation_dropout,
                "norm_first": self.norm_first,
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="keras_transformer")
class EncoderLayer(_TransformerLayerBase):
    """Self-attention then a feed-forward network, each in a residual block.

    Post-norm as in the paper: x = LayerNorm(x + Dropout(Sublayer(x))).

    Args:
        d_model: int. Model width D; divisible by `num_heads`.
        num_heads: int. Attention heads H.
        d_ff: int. Feed-forward inner width.
        dropout: float. Residual dropout P_drop (0.1 in the base model).
        attention_dropout: float. Dropout on attention probabilities.
        activation_dropout: float. Dropout inside the feed-forward network.
        norm_first: bool. Pre-norm instead of the paper's post-norm.
        layer_norm_epsilon: float.
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        x: (B, S, D) tensor.
        attention_mask: bool tensor broadcastable to (B, S, S).
        training: bool.

    Returns:
        (B, S, D) tensor.

    Example:
    >>> EncoderLayer(d_model=8, num_heads=2, d_ff=16)(keras.ops.ones((2, 3, 8))).shape
    (2, 3, 8)

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 3.1.
    """

    def build(self, x_shape):
        self.self_attention = self._attention("self_attention")
        self.self_attention.build(x_shape, x_shape)
        self.self_attention_norm = self._norm("self_attention_norm")
        self.self_attention_norm.build(x_shape)
        self.self_attention_dropout = self._dropout()
        self._build_feed_forward(x_shape)
        self.built = True

    def call(self, x, attention_mask=None, training=None):
        x, _ = residual_block(
            x,
            lambda y: (self.self_attention(y, y, attention_mask=attention_mask, training=training), ()),
            self.self_attention_norm,
            self.self_attention_dropout,
            self.norm_first,
            training,
        )
        return self._feed_forward_block(x, training)  # (B, S, D)


class _StackBase(_TransformerLayerBase):
    """A stack of `num_layers` layers of `layer_class`, sharing their arguments."""

    layer_class = None

    def __init__(self, num_layers, d_model, num_heads, d_ff, **kwargs):
        super().__init__(d_model, num_heads, d_ff, **kwargs)
        if int(num_layers) < 1:
            raise ValueError(f"num_layers must be at least 1; got {num_layers}.")
        self.num_layers = int(num_layers)

    def _build_stack(self, x_shape, *layer_build_args):
        # Dropout on the sums of embeddings and positional encodings (section 5.4).
        self.input_dropout = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.blocks = []
        for i in range(self.num_layers):
            block = self.layer_class(
                name=f"layer_{i}", dtype=self.dtype_policy, **self._layer_config()
            )
            block.build(x_shape, *layer_build_args)
            self.blocks.append(block)
        # Pre-norm stacks end with a LayerNorm; post-norm layers already end with one.
        self.final_norm = None
        if self.norm_first:
            self.final_norm = keras.layers.LayerNormalization(
                epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="final_norm"
            )
            self.final_norm.build(x_shape)
        self.built = True

    def _finish(self, x):
        return x if self.final_norm is None else self.final_norm(x)

    def _layer_config(self):
        config = _TransformerLayerBase.get_config(self)
        for key in keras.layers.Layer.get_config(self):
            config.pop(key, None)  # name, dtype, trainable: not the layer's to inherit
        return config

    def get_config(self):
        return {**super().get_config(), "num_layers": self.num_layers}


@keras.saving.register_keras_serializable(package="keras_transformer")
class Encoder(_StackBase):
    """A stack of `num_layers` EncoderLayers over embedded source tokens.

    Args:
        num_layers: int. N (6 in the paper).
        d_model, num_heads, d_ff, dropout, attention_dropout,
        activation_dropout, norm_first, layer_norm_epsilon: as in
            `EncoderLayer`; `dropout` also applies to the input embeddings.
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        x: (B, S, D) embedded source.
        attention_mask: bool tensor broadcastable to (B, S, S).
        training: bool.

    Returns:
        (B, S, D) encoder output.

    Example:
    >>> Encoder(num_layers=2, d_model=8, num_heads=2, d_ff=16)(keras.ops.ones((1, 4, 8))).shape
    (1, 4, 8)
    """

    layer_class = EncoderLayer

    def build(self, x_shape):
        self._build_stack(x_shape)

    def call(self, x, attention_mask=None, training=None):
        x = self.input_dropout(x, training=training)
        for block in self.blocks:
            x = block(x, attention_mask=attention_mask, training=training)  # (B, S, D)
        return self._finish(x)
