"""How big a run's training corpus is: what the recipe's rules read (`training.auto_config`).

`measure(data)` counts the training pairs (a local corpus from its one
scan, a tfds dataset from its split metadata) and measures the length of
the pairs on a uniform sample of them (a tfds dataset: its first pairs).
Lengths are in whitespace words: the subword vocabulary is not trained
yet when the recipe reads them.
"""

import dataclasses

import numpy as np
import tensorflow_datasets as tfds

from keras_transformer.data import sources
from keras_transformer.data.local_corpus import open_corpus


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


def measure(data, sample_size=5000):
    """`CorpusSize` of a run's training split (`data`: a `config.DataSettings`)."""
    if sources.is_local_dataset(data.dataset):
        count = open_corpus(data.dataset, data.validation, data.test).stats.read
        return from_pairs(count, sources.sample_training_pairs(data, sample_size))
    builder = tfds.builder(data.dataset, data_dir=data.data_dir)
    count = builder.info.splits["train"].num_examples
    first, _ = sources.load_split(data, "train")
    sample = [(s.decode("utf-8", "replace"), t.decode("utf-8", "replace"))
              for s, t in sources.nonempty(first).take(sample_size).as_numpy_iterator()]
    return from_pairs(count, sample)
