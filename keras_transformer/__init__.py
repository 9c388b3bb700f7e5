"""keras_transformer: the Transformer of "Attention Is All You Need" in TensorFlow/Keras 3.

The package is layered; each folder is one layer and imports only those
before it:

- `modeling/`: special ids, masks, layers, the Transformer, presets;
- `data/`: corpora (the built-in `numerals_en_de`, local files, tfds),
  the SentencePiece tokenizer and the batching pipeline;
- `decoding/`: search, the one `Translator`, scoring, quality figures and
  loading a trained run for inference;
- `export/`: one module per deployment target (SavedModel, CTranslate2);
- `training/`: the trainer and everything around it, and the end-to-end recipe;
- `benchmarks/`, `plots/` and `cli/` on top.

`config` (the run settings, in sections), `run_dir` (a run folder's layout)
and `files` (atomic writes) are shared by all of them.
"""

import importlib

from keras_transformer.modeling import PRESETS, Transformer, TransformerConfig, layers, masks, presets

__version__ = "0.4.0"

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

# The training-side names of the public API load on first use, so that
# `import keras_transformer.decoding` (or export) never loads training.
_LAZY = {
    "LabelSmoothedCrossEntropy": "keras_transformer.training.losses",
    "MaskedAccuracy": "keras_transformer.training.metrics",
    "TransformerSchedule": "keras_transformer.training.optimization",
}
# Modules that moved in 0.2, by their old name, so that
# `from keras_transformer import scoring` keeps working where a user wrote it.
_MOVED = {
    "scoring": "keras_transformer.decoding.scoring",
    "evaluation": "keras_transformer.decoding.evaluation",
    "translator": "keras_transformer.decoding.translator",
    "model": "keras_transformer.modeling.transformer",
    "schedule": "keras_transformer.training.optimization",
    "losses": "keras_transformer.training.losses",
    "metrics": "keras_transformer.training.metrics",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in _MOVED:
        return importlib.import_module(_MOVED[name])
    raise AttributeError(f"module 'keras_transformer' has no attribute {name!r}")
