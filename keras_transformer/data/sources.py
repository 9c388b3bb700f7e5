"""Where sentence pairs come from: tfds datasets, local TSV or line-aligned files.

`load_pairs` returns a `tf.data.Dataset` of (source, target) string pairs and
a `ReadStats` with what was read and what was skipped, by reason. Malformed
local lines are skipped and counted, never fatal.

A dataset spec (`--dataset`) is one of:
- a tfds name, e.g. `wmt14_translate/de-en` or the built-in `numerals_en_de`;
- `PATH.tsv`: one `source<TAB>target` pair per line;
- `SOURCE_PATH,TARGET_PATH`: two line-aligned files.
"""

import collections
import dataclasses
import os

import tensorflow as tf
import tensorflow_datasets as tfds

from keras_transformer.config import is_local_dataset
from keras_transformer.data import builtin_dataset  # noqa: F401  (registers the tfds builder)

DEFAULT_DATASET = builtin_dataset.NAME


@dataclasses.dataclass
class ReadStats:
    """Counts of pairs read and skipped. `skipped` maps a reason to a count."""

    read: int = 0
    skipped: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    def skip(self, reason, count=1):
        self.skipped[reason] += count


def _decode(raw, stats):
    try:
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        stats.skip("undecodable")
        return None


def _keep(source, target, stats):
    if not source.strip() or not target.strip():
        stats.skip("empty side")
        return False
    stats.read += 1
    return True


def read_tsv(path, stats):
    """Pairs from a `source<TAB>target` file."""
    pairs = []
    with open(path, "rb") as f:
        for raw in f:
            line = _decode(raw, stats)
            if line is None:
                continue
            if "\t" not in line:
                stats.skip("no TAB")
                continue
            source, target = line.split("\t", 1)
            if "\t" in target:
                stats.skip("more than one TAB")
                continue
            if _keep(source, target, stats):
                pairs.append((source.strip(), target.strip()))
    return pairs


def read_parallel(source_path, target_path, stats):
    """Pairs from two line-aligned files; a line-count mismatch is an error."""
    with open(source_path, "rb") as f:
        source_lines = f.readlines()
    with open(target_path, "rb") as f:
        target_lines = f.readlines()
    if len(source_lines) != len(target_lines):
        raise ValueError(
            f"{source_path!r} has {len(source_lines)} lines but {target_path!r} has "
            f"{len(target_lines)}; line-aligned files must have the same number of lines."
        )
    pairs = []
    for raw_source, raw_target in zip(source_lines, target_lines):
        source, target = _decode(raw_source, stats), None
        if source is not None:
            target = _decode(raw_target, stats)
        if source is None or target is None:
            continue
        if _keep(source, target, stats):
            pairs.append((source.strip(), target.strip()))
    return pairs


def _local_pairs(spec, stats):
    paths = spec.split(",") if "," in spec else [spec]
    for path in paths:
        if not os.path.exists(path):
            raise FileNotFoundError(f"Dataset file {path!r} does not exist.")
    if len(paths) == 2:
        return read_parallel(paths[0], paths[1], stats)
    if len(paths) == 1:
        return read_tsv(paths[0], stats)
    raise ValueError(f"A local dataset is PATH.tsv or SOURCE,TARGET; got {spec!r}.")


def local_split(pairs, split, held_out=1000):
    """Splits one local corpus: the last `held_out` pairs (at most 5%) are
    validation and test; the rest is train."""
    held_out = min(held_out, len(pairs) // 20)
    if split == "train":
        return pairs[: len(pairs) - held_out]
    return pairs[len(pairs) - held_out:]


def load_pairs(spec, split, source_lang=None, target_lang=None, data_dir=None, held_out=1000):
    """(tf.data.Dataset of (source, target) tf.string pairs, ReadStats).

    For tfds datasets, the languages default to the dataset's supervised keys
    and empty sides are filtered in the pipeline (counted by `count_pairs`).
    For a local corpus without separate splits, see `local_split`.
    """
    stats = ReadStats()
    if is_local_dataset(spec):
        pairs = local_split(_local_pairs(spec, stats), split, held_out)
        if not pairs:
            raise ValueError(f"No usable sentence pairs in {spec!r} for split {split!r}.")
        sources, targets = zip(*pairs)
        return tf.data.Dataset.from_tensor_slices((list(sources), list(targets))), stats
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
    builder.download_and_prepare()
    dataset = builder.as_dataset(split=split, shuffle_files=False)
    dataset = dataset.map(lambda ex: (ex[source_lang], ex[target_lang]), num_parallel_calls=tf.data.AUTOTUNE)
    return dataset, stats


def nonempty(dataset):
    """Drops pairs with an empty (or whitespace-only) side."""
    return dataset.filter(
        lambda s, t: tf.logical_and(tf.strings.length(tf.strings.strip(s)) > 0,
                                    tf.strings.length(tf.strings.strip(t)) > 0)
    )
