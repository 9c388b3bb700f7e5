"""Where sentence pairs come from: tfds datasets, local TSV or line-aligned files.

`load_pairs` returns a `tf.data.Dataset` of (source, target) string pairs and
a `ReadStats` with what was read and what was skipped, by reason. Malformed
local lines are skipped and counted, never fatal.

A dataset spec (`--dataset`) is one of:
- a tfds name, e.g. `wmt14_translate/de-en` or the built-in `numerals_en_de`;
- `PATH.tsv`: one `source<TAB>target` pair per line;
- `SOURCE_PATH,TARGET_PATH`: two line-aligned files.
"""

import os
import random
import re

import tensorflow as tf
import tensorflow_datasets as tfds

from keras_transformer.data import numerals_en_de  # registers the built-in tfds builder
from keras_transformer.data.local_corpus import (HELD_OUT, ReadStats, open_corpus, pair_key, read_held_out,
                                                 reservoir_sample)

DEFAULT_DATASET = numerals_en_de.NAME


def is_local_dataset(spec):
    """True for `PATH.tsv`, `SOURCE_PATH,TARGET_PATH` or an existing file; else a tfds name."""
    return spec.endswith(".tsv") or "," in spec or os.path.exists(spec)


def dataset_slug(spec):
    """A folder name for a dataset spec: `wmt14_translate/de-en` ->
    `wmt14_translate_de-en`, `data/corpus.tsv` -> `corpus`, `a.en,a.de` -> `a`."""
    if is_local_dataset(spec):
        spec = os.path.splitext(os.path.basename(spec.split(",")[0]))[0]
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", spec).strip("_.") or "dataset"


def load_pairs(spec, split, source_lang=None, target_lang=None, data_dir=None, validation=None, test=None,
               held_out=HELD_OUT, seed=0):
    """(tf.data.Dataset of (source, target) tf.string pairs, ReadStats).

    validation, test: explicit held-out sets (PATH.tsv or SOURCE,TARGET).
        Given, they are that split. Training pairs equal to a validation or
        test pair (explicit, drawn, or a tfds dataset's own) are removed
        from the "train" split.
    held_out: pairs per held-out set drawn from a local corpus (see
        `local_corpus`), which has no splits of its own.
    seed: the order in which a local corpus' training shards are read.

    For tfds datasets, the languages default to the dataset's supervised keys
    and empty sides are filtered in the pipeline (counted by `count_pairs`).
    A local corpus' "train" split is streamed from disk; its stats count the
    training pairs, the skipped lines and the held-out duplicates removed.
    """
    if is_local_dataset(spec):
        return _local_pairs(spec, split, validation, test, held_out, seed)
    explicit = {"validation": validation, "test": test}
    if split in explicit and explicit[split]:
        pairs = read_held_out(explicit[split])
        return from_pairs(pairs), ReadStats(read=len(pairs))
    return _tfds_pairs(spec, split, source_lang, target_lang, data_dir, explicit), ReadStats()


def _local_pairs(spec, split, validation, test, held_out, seed):
    """`load_pairs` of a local corpus: its training pairs streamed, or a held-out set."""
    corpus = open_corpus(spec, validation, test, held_out)
    if split == "train":
        if corpus.stats.read == 0:
            raise ValueError(f"No usable sentence pairs in {spec!r} for split 'train'.")
        return corpus.train_dataset(seed), corpus.stats
    pairs = corpus.split(split)
    if not pairs:
        raise ValueError(f"No usable sentence pairs in {spec!r} for split {split!r}; "
                         f"pass --{split} with a held-out set.")
    return from_pairs(pairs), ReadStats(read=len(pairs))


def _tfds_pairs(spec, split, source_lang, target_lang, data_dir, explicit):
    """`load_pairs`' dataset of a tfds dataset's split; its "train" split
    without the pairs of the held-out sets (`explicit` {split: spec or None},
    else the dataset's own)."""
    try:
        builder = tfds.builder(spec, data_dir=data_dir)
    except tfds.core.registered.DatasetNotFoundError as error:
        raise ValueError(
            f"Unknown dataset {spec!r}: not a local file and not a tfds dataset "
            f"({str(error).splitlines()[0]})."
        ) from None
    keys = builder.info.supervised_keys or ()
    source_lang = source_lang or (keys[0] if keys else None)
    target_lang = target_lang or (keys[1] if len(keys) > 1 else None)
    languages = getattr(builder.info.features, "languages", None) or list(builder.info.features.keys())
    for lang, flag in ((source_lang, "--source-lang"), (target_lang, "--target-lang")):
        if lang not in languages:
            raise ValueError(f"{flag} {lang!r} is not in {spec!r}; expected one of {sorted(languages)}.")
    prepare(builder)

    def tfds_split(name):
        return builder.as_dataset(split=name, shuffle_files=False).map(
            lambda ex: (ex[source_lang], ex[target_lang]), num_parallel_calls=tf.data.AUTOTUNE)

    dataset = tfds_split(split)
    if split != "train":
        return dataset
    held_out_pairs = []
    for name, held_out_spec in explicit.items():
        if held_out_spec:
            held_out_pairs += read_held_out(held_out_spec)
        elif name in builder.info.splits:
            held_out_pairs += [(s.decode("utf-8").strip(), t.decode("utf-8").strip())
                               for s, t in tfds.as_numpy(tfds_split(name))]
    return without_pairs(dataset, held_out_pairs) if held_out_pairs else dataset


def prepare(builder):
    """`builder.download_and_prepare()`, leaving Python's global random state as
    it was. tfds draws from it while preparing, so without this a run that
    prepares its dataset (the first on a machine) would initialise its weights
    differently from every later run of the same command: Keras seeds
    initializers from that state after `keras.utils.set_random_seed`."""
    state = random.getstate()
    try:
        builder.download_and_prepare()
    finally:
        random.setstate(state)


def load_split(data, split, dataset=None):
    """`load_pairs` for a split of a run's data (a `config.DataSettings`: its
    dataset, languages and held-out sets); `dataset` replaces the run's
    dataset and its held-out sets."""
    if dataset and dataset != data.dataset:
        return load_pairs(dataset, split, data.source_lang, data.target_lang, data.data_dir)
    return load_pairs(data.dataset, split, data.source_lang, data.target_lang, data.data_dir,
                      validation=data.validation, test=data.test, seed=data.seed)


def read_split(data, split, dataset=None, limit=None):
    """(sources, references) lists of str for `split` of a run's data (a
    `config.DataSettings`; or of `dataset` instead), pairs with an empty side
    left out: the held-out sentences that validation, model choice and
    evaluation translate."""
    pairs, _ = load_split(data, split, dataset)
    pairs = nonempty(pairs)
    if limit:
        pairs = pairs.take(limit)
    sentences, references = [], []
    for source, reference in pairs.as_numpy_iterator():
        sentences.append(source.decode("utf-8"))
        references.append(reference.decode("utf-8"))
    return sentences, references


def sample_training_pairs(data, k, seed=0):
    """A uniform sample of `k` training pairs (str, str) from the whole
    training split of a run's data (a `config.DataSettings`), held-out pairs
    excluded: one pass, O(k) memory (`local_corpus.reservoir_sample`)."""
    if is_local_dataset(data.dataset):
        pairs = open_corpus(data.dataset, data.validation, data.test).iter_train()
    else:
        pairs = ((s.decode("utf-8", "replace"), t.decode("utf-8", "replace"))
                 for s, t in nonempty(load_split(data, "train")[0]).as_numpy_iterator())
    return reservoir_sample(pairs, k, seed)


def from_pairs(pairs):
    """A tf.data.Dataset of (source, target) tf.string scalars from in-memory (str, str) pairs."""
    sources, targets = zip(*pairs)
    return tf.data.Dataset.from_tensor_slices((list(sources), list(targets)))


def without_pairs(dataset, pairs):
    """`dataset` of (source, target) strings without the pairs equal (after
    stripping) to one of `pairs`."""
    keys = tf.constant(sorted({pair_key(s, t) for s, t in pairs}))
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(keys, tf.ones_like(keys, tf.int32)), default_value=0)

    def keep(source, target):  # pair_key, in-graph
        key = tf.strings.join([tf.strings.strip(source), tf.strings.strip(target)], separator="\t")
        return table.lookup(key) == 0

    return dataset.filter(keep)


def nonempty(dataset):
    """Drops pairs with an empty (or whitespace-only) side."""
    return dataset.filter(
        lambda s, t: tf.logical_and(tf.strings.length(tf.strings.strip(s)) > 0,
                                    tf.strings.length(tf.strings.strip(t)) > 0)
    )
