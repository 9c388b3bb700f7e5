"""How big a run's training corpus is: what the recipe's rules read (`training.auto_config`).

`training_sample(data)` counts the training pairs (a local corpus from
its one scan, a tfds dataset from its split metadata) and draws a uniform
sample of them (a tfds dataset: its first pairs, so that WMT's millions are
not read); `from_pairs` measures the pairs' lengths on it, and the recipe's
probe makes its batches from the same sample.
Lengths are in whitespace words: the subword vocabulary is not trained
yet when the recipe reads them.
"""

import dataclasses

import numpy as np
import tensorflow_datasets as tfds

from keras_transformer.data import sources
from keras_transformer.data.local_corpus import open_corpus

# Pairs in the sample the corpus is measured on (and the budget's probe trains on): their
# lengths' 99th percentile rests on 50 pairs, and on LibreOffice (20 words a side) they
# make a few dozen batches of 4,096 tokens.
SAMPLE_PAIRS = 5000


@dataclasses.dataclass(frozen=True)
class CorpusSize:
    """A training corpus' size."""

    pairs: int  # training pairs
    mean_words: float  # words per side of a pair, on average
    long_words: int  # the 99th percentile of a pair's longer side, in words
    word_types: int  # distinct words in the sample, both sides
    # A pair's longer side, in words, averaged over the tokens of a batch (sum L^2 / sum L): the
    # length a batch of a fixed number of tokens is padded to, on average, which sets what an update costs.
    batch_words: float

    @property
    def words(self):
        """Words on both sides of the whole corpus (an estimate from the sample)."""
        return int(self.pairs * 2 * self.mean_words)


def from_pairs(count, sample):
    """`CorpusSize` of `count` pairs from a sample of (source, target) str pairs."""
    if not sample:
        raise ValueError("No training pairs to measure.")
    lengths = np.array([(len(s.split()), len(t.split())) for s, t in sample], dtype=np.float64)  # (n, 2)
    longer = lengths.max(axis=1)  # (n,)
    return CorpusSize(pairs=int(count), mean_words=float(lengths.mean()),
                      long_words=int(np.ceil(np.percentile(longer, 99))),
                      word_types=len({word for pair in sample for side in pair for word in side.split()}),
                      batch_words=float((longer ** 2).sum() / max(longer.sum(), 1.0)))


def training_sample(data, size=SAMPLE_PAIRS, seed=0):
    """(pairs in a run's training split, a list of up to `size` of them as
    (str, str)): a local corpus' drawn uniformly with `seed`, held-out pairs
    excluded; a tfds dataset's first ones. `data`: a `config.DataSettings`."""
    if sources.is_local_dataset(data.dataset):
        count = open_corpus(data.dataset, data.validation, data.test).stats.read
        return count, sources.sample_training_pairs(data, size, seed)
    first, _ = sources.load_split(data, "train")  # first: an unknown name is refused with a message naming it
    count = tfds.builder(data.dataset, data_dir=data.data_dir).info.splits["train"].num_examples
    return count, [(s.decode("utf-8", "replace"), t.decode("utf-8", "replace"))
                   for s, t in sources.nonempty(first).take(size).as_numpy_iterator()]
