"""keras_transformer: the Transformer of "Attention Is All You Need" in TensorFlow/Keras 3."""

from keras_transformer import layers, masks, presets
from keras_transformer.losses import LabelSmoothedCrossEntropy
from keras_transformer.metrics import MaskedAccuracy
from keras_transformer.model import Transformer
from keras_transformer.presets import PRESETS, TransformerConfig
from keras_transformer.schedule import TransformerSchedule

__version__ = "0.1.0"

__all__ = [
    "LabelSmoothedCrossEntropy",
    "MaskedAccuracy",
    "PRESETS",
    "Transformer",
    "TransformerConfig",
    "TransformerSchedule",
    "layers",
    "masks",
    "presets",
]
