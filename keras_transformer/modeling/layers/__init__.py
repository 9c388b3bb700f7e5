"""Keras layers of the Transformer, each a subclassed layer with `get_config`."""

from keras_transformer.modeling.layers.attention import MultiHeadAttention
from keras_transformer.modeling.layers.decoder import Decoder, DecoderLayer
from keras_transformer.modeling.layers.embedding import PositionalEmbedding, sinusoidal_encoding
from keras_transformer.modeling.layers.encoder import Encoder, EncoderLayer
from keras_transformer.modeling.layers.feed_forward import FeedForward

__all__ = [
    "Decoder",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "FeedForward",
    "MultiHeadAttention",
    "PositionalEmbedding",
    "sinusoidal_encoding",
]
