"""keras_transformer: the Transformer of "Attention Is All You Need" in TensorFlow/Keras 3."""

from keras_transformer import layers, masks, presets
from keras_transformer.model import Transformer
from keras_transformer.presets import PRESETS, TransformerConfig

__version__ = "0.1.0"

__all__ = ["PRESETS", "Transformer", "TransformerConfig", "layers", "masks", "presets"]
