"""What every export target shares: its settings record and its version folders.

Each export directory (a SavedModel version, a CTranslate2 model) carries
`keras_transformer.json`: the decoding settings fixed at export (beam size,
alpha, length limits, n-best, guards), the dtype policy the model computes
in and the package version that exported it, so that a deployed model says
how it translates and what made it. The SentencePiece model
travels with it as `sentencepiece.model`.
"""

import json
import os

from keras_transformer import __version__

SETTINGS_FILENAME = "keras_transformer.json"
VOCABULARY_FILENAME = "sentencepiece.model"


def translator_settings(translator):
    """The settings record of a `decoding.Translator`."""
    policy = translator.models[0].dtype_policy.name
    return {"beam_size": translator.beam_size, "alpha": translator.alpha, "n_best": translator.n_best,
            "max_input_length": translator.max_input_length, "extra_length": translator.extra_length,
            "no_repeat_ngram_size": translator.no_repeat_ngram_size,
            "repetition_penalty": translator.repetition_penalty, "precision": policy}


def write_settings(directory, settings):
    """Writes `settings`, and the version of this package as `keras_transformer_version`."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, SETTINGS_FILENAME), "w", encoding="utf-8") as f:
        json.dump({**settings, "keras_transformer_version": __version__}, f, indent=2, sort_keys=True)


def read_settings(directory):
    with open(os.path.join(directory, SETTINGS_FILENAME), encoding="utf-8") as f:
        return json.load(f)


def versions(base):
    """The integer version folders of `base`, highest first ([] if none)."""
    if not os.path.isdir(base):
        return []
    return sorted((int(name) for name in os.listdir(base) if name.isdigit()), reverse=True)


def next_version(base):
    """1 + the highest integer sub-directory of `base` (1 if there is none)."""
    return (versions(base) or [0])[0] + 1
