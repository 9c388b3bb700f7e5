"""Modeling: the special ids, masks, layers, the `Transformer` and its presets.

It imports nothing else of the package: data, training, decoding and
export all build on it.
"""

from keras_transformer.modeling import layers, masks, presets
from keras_transformer.modeling.presets import PRESETS, TransformerConfig
from keras_transformer.modeling.transformer import Transformer, build_transformer

__all__ = ["PRESETS", "Transformer", "TransformerConfig", "build_transformer", "layers", "masks", "presets"]
