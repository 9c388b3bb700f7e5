"""Position-wise feed-forward network (paper section 3.3).

Notation: B batch, L length, D model width, F inner width (d_ff).
"""

import keras

from keras_transformer.modeling.layers.attention import clone_initializer
from keras_transformer.modeling.layers.dense import Dense


@keras.saving.register_keras_serializable(package="keras_transformer")
class FeedForward(keras.layers.Layer):
    """FFN(x) = max(0, x W1 + b1) W2 + b2, applied at every position.

    Args:
        d_model: int. Input and output width D.
        d_ff: int. Inner width F (2048 in the base model).
        activation: activation of the inner layer; "relu" in the paper.
        activation_dropout: float. Dropout on the inner activations (0 in
            the paper).
        kernel_initializer: initializer of both kernels.
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        x: (B, L, D) tensor.
        training: bool. Enables dropout.

    Returns:
        (B, L, D) tensor.

    Example:
    >>> FeedForward(d_model=8, d_ff=32)(keras.ops.ones((2, 3, 8))).shape
    (2, 3, 8)

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 3.3.
    """

    def __init__(
        self,
        d_model,
        d_ff,
        activation="relu",
        activation_dropout=0.0,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if int(d_model) < 1 or int(d_ff) < 1:
            raise ValueError(f"d_model and d_ff must be positive; got d_model={d_model}, d_ff={d_ff}.")
        self.d_model = int(d_model)
        self.d_ff = int(d_ff)
        self.activation = keras.activations.get(activation)
        self.activation_dropout = activation_dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, x_shape):
        self.inner_dense = Dense(
            self.d_ff,
            activation=self.activation,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="inner",
        )
        self.inner_dense.build(x_shape)
        self.inner_dropout = keras.layers.Dropout(self.activation_dropout, dtype=self.dtype_policy)
        self.output_dense = Dense(
            self.d_model,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="output",
        )
        self.output_dense.build(tuple(x_shape[:-1]) + (self.d_ff,))
        self.built = True

    def call(self, x, training=None):
        h = self.inner_dense(x)  # (B, L, F)
        h = self.inner_dropout(h, training=training)
        return self.output_dense(h)  # (B, L, D)

    def compute_output_shape(self, x_shape):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "d_model": self.d_model,
                "d_ff": self.d_ff,
                "activation": keras.activations.serialize(self.activation),
                "activation_dropout": self.activation_dropout,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
