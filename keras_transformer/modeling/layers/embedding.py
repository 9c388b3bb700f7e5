"""Token embeddings plus sinusoidal positions (paper sections 3.4 and 3.5).

Notation: B batch, L sequence length, D model width (d_model), V vocabulary.
"""

import math

import keras
from keras import ops

from keras_transformer.modeling.layers.dense import project


def sinusoidal_encoding(positions, d_model, max_wavelength=10000.0):
    """The paper's positional encoding, computed on the fly for any positions.

    PE(pos, 2i) = sin(pos / max_wavelength^(2i / d_model)) and
    PE(pos, 2i+1) = cos(pos / max_wavelength^(2i / d_model)):
    sine on even dimensions, cosine on odd ones, interleaved.

    positions: (L,) int or float. Returns (L, D) float32.
    """
    positions = ops.cast(positions, "float32")
    pair_index = ops.arange(d_model // 2, dtype="float32")  # i, (D/2,)
    inverse_frequency = ops.power(max_wavelength, -2.0 * pair_index / d_model)  # (D/2,)
    angles = positions[:, None] * inverse_frequency[None, :]  # (L, D/2)
    encoding = ops.stack([ops.sin(angles), ops.cos(angles)], axis=-1)  # (L, D/2, 2)
    return ops.reshape(encoding, (-1, d_model))  # (L, D): sin, cos, sin, cos, ...


@keras.saving.register_keras_serializable(package="keras_transformer")
class PositionalEmbedding(keras.layers.Layer):
    """Token embedding scaled by sqrt(d_model) plus sinusoidal positions.

    Id 0 is padding. The layer attaches no Keras implicit mask (which would
    leak into loss weighting); the model builds explicit attention masks from
    `ids != 0` with `keras_transformer.modeling.masks.padding_mask`. The layer
    also provides `attend`, the pre-softmax projection with the same matrix,
    for tied input/output embeddings (section 3.4).

    Args:
        vocab_size: int. Number of token ids V.
        d_model: int. Embedding width D; must be even.
        max_wavelength: float. Base of the sinusoids (10000 in the paper).
        embeddings_initializer: initializer of the (V, D) matrix. Defaults to
            a normal with stddev d_model**-0.5, so that the scaled embedding
            has unit variance and tied output logits start small.
        **kwargs: passed to `keras.layers.Layer`.

    Call arguments:
        ids: (B, L) int tensor of token ids.
        start_index: int scalar, the position of `ids[:, 0]`. Non-zero when
            decoding one token at a time.

    Returns:
        (B, L, D) tensor in the compute dtype.

    Example:
    >>> embed = PositionalEmbedding(vocab_size=100, d_model=16)
    >>> embed(ops.array([[5, 7, 0]])).shape
    (1, 3, 16)

    References:
        Vaswani et al., "Attention Is All You Need", 2017, sections 3.4-3.5.
    """

    def __init__(
        self,
        vocab_size,
        d_model,
        max_wavelength=10000.0,
        embeddings_initializer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if int(d_model) < 2 or int(d_model) % 2:
            raise ValueError(f"d_model must be a positive even number; got {d_model}.")
        if int(vocab_size) < 2:
            raise ValueError(f"vocab_size must be at least 2; got {vocab_size}.")
        self.vocab_size = int(vocab_size)
        self.d_model = int(d_model)
        self.max_wavelength = float(max_wavelength)
        if embeddings_initializer is None:
            embeddings_initializer = keras.initializers.RandomNormal(stddev=self.d_model**-0.5)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)

    def build(self, ids_shape=None):
        self.token_embedding = keras.layers.Embedding(
            self.vocab_size,
            self.d_model,
            embeddings_initializer=self.embeddings_initializer,
            dtype=self.dtype_policy,
            name="token_embedding",
        )
        self.token_embedding.build((None, None))
        self.built = True

    @property
    def embeddings(self):
        """The (V, D) embedding matrix variable."""
        return self.token_embedding.embeddings

    def call(self, ids, start_index=0):
        length = ops.shape(ids)[1]
        x = self.token_embedding(ids)  # (B, L, D)
        x = x * ops.cast(math.sqrt(self.d_model), x.dtype)
        positions = ops.arange(length, dtype="int32") + ops.cast(start_index, "int32")  # (L,)
        encoding = sinusoidal_encoding(positions, self.d_model, self.max_wavelength)  # (L, D)
        return x + ops.cast(encoding, x.dtype)[None, :, :]  # (B, L, D)

    def attend(self, x, matrix=None):
        """Pre-softmax projection with the embedding matrix: (B, L, D) -> (B, L, V) float32.

        matrix: the (D, V) matrix `attend_matrix()` returns, if the caller
        already has it (a decoding loop reads it once, not at every step)."""
        matrix = self.attend_matrix(x.dtype) if matrix is None else matrix  # (D, V)
        return ops.cast(project(x, matrix), "float32")  # (B, L, V)

    def attend_matrix(self, dtype):
        """The transposed embedding matrix in `dtype`, (D, V), as `attend` multiplies by it."""
        return ops.transpose(ops.cast(self.embeddings, dtype))

    def compute_output_shape(self, ids_shape):
        return tuple(ids_shape) + (self.d_model,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "d_model": self.d_model,
                "max_wavelength": self.max_wavelength,
                "embeddings_initializer": keras.initializers.serialize(
                    self.embeddings_initializer
                ),
            }
        )
        return config
