"""A run's shared SentencePiece vocabulary: trained once, on a uniform sample
of its training pairs, or copied from the run it fine-tunes."""

import os

import sentencepiece as spm

from keras_transformer.data import sources
from keras_transformer.data.tokenizer import Tokenizer, train_sentencepiece
from keras_transformer.training import fine_tuning


def load_tokenizer(data, run_dir, init_from=None, max_pairs=1_000_000):
    """The run's `Tokenizer`. On first use its SentencePiece model is copied
    from `init_from` (a trained run), or trained on a uniform sample of at
    most `max_pairs` training pairs drawn from the whole training split
    (never its first lines). A vocabulary of another size in the folder is
    trained again.

    data: the run's `config.DataSettings`; run_dir: its `RunDir`.
    """
    path = run_dir.vocabulary_path
    if os.path.exists(path) and not init_from and _pieces(path) != data.vocab_size:
        # Left by a run that never started (a time budget's probe trains the vocabulary before the run is
        # recorded) with another size: not this run's.
        os.remove(path)
    if not os.path.exists(path):
        if init_from:
            fine_tuning.copy_vocabulary(init_from, path)
        else:
            print(f"Sampling up to {max_pairs:,} training pairs of {data.dataset} for the vocabulary ...",
                  flush=True)
            pairs = sources.sample_training_pairs(data, max_pairs)
            print(f"Training a {data.vocab_size}-piece SentencePiece model on {len(pairs):,} pairs ...",
                  flush=True)
            train_sentencepiece((text for pair in pairs for text in pair), data.vocab_size, path)
    return Tokenizer(path)


def _pieces(path):
    """The vocabulary size of the SentencePiece model at `path` (plain Python:
    no TensorFlow resource to outlive)."""
    return spm.SentencePieceProcessor(model_file=path).vocab_size()
