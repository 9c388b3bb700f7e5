"""A tiny Transformer trained in seconds on a toy task, for tests that need
a model that has learnt to end its outputs (a random one runs to its length
limit, where engines may legitimately differ).

The task: the target is the source reversed, each id mapped into the target
vocabulary. Ids 0-3 are PAD, UNK, BOS and EOS on both sides.
"""

import keras
import numpy as np

import keras_transformer as kt
from keras_transformer.modeling.special_ids import BOS_ID, EOS_ID

SOURCE_VOCAB = 24


def target_id(source_id, target_vocab):
    return 4 + (source_id - 4) % (target_vocab - 4)


def pairs(rng, count, target_vocab, min_length=2, max_length=8):
    """(source ids + EOS, target ids) lists of `count` random pairs."""
    sources, targets = [], []
    for _ in range(count):
        words = rng.integers(4, SOURCE_VOCAB, size=rng.integers(min_length, max_length + 1)).tolist()
        sources.append(words + [EOS_ID])
        targets.append([target_id(w, target_vocab) for w in reversed(words)])
    return sources, targets


def padded(rows, width):
    out = np.zeros((len(rows), width), "int32")
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def train_reversal_model(norm_first=False, tie_embeddings=True, target_vocab=None, steps=400, seed=0, **depths):
    """A tiny Transformer of the given variant, trained on the reversal task.

    target_vocab: None for the shared vocabulary, else a separate target
    vocabulary of that size. `depths`: num_encoder_layers and
    num_decoder_layers, if not the preset's. Returns the model.
    """
    keras.utils.set_random_seed(seed)
    model = reversal_model_of(norm_first, tie_embeddings, target_vocab, **depths)
    rng = np.random.default_rng(seed)
    sources, targets = pairs(rng, steps * 32, target_vocab or SOURCE_VOCAB)
    source_ids = padded(sources, 9)  # (N, S)
    target_in = padded([[BOS_ID] + t for t in targets], 9)  # (N, T)
    target_out = padded([t + [EOS_ID] for t in targets], 9)  # (N, T)
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss=kt.LabelSmoothedCrossEntropy(0.0))
    model.fit((source_ids, target_in), target_out, batch_size=32, epochs=1, verbose=0, shuffle=False)
    return model


def reversal_model_of(norm_first=False, tie_embeddings=True, target_vocab=None, **depths):
    """The built, untrained model of `train_reversal_model` (to load its saved weights into)."""
    model = kt.Transformer.from_preset("tiny", vocab_size=SOURCE_VOCAB, target_vocab_size=target_vocab,
                                       norm_first=norm_first, tie_embeddings=tie_embeddings, dropout=0.0, **depths)
    model.build()
    return model


def vocabulary(size, prefix):
    """Token strings by id: the four specials, then `prefix`4, `prefix`5, ..."""
    return ["<pad>", "<unk>", "<s>", "</s>"] + [f"{prefix}{i}" for i in range(4, size)]
