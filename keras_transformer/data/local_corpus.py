"""A local corpus streamed from disk, with held-out sets drawn from across it.

A local corpus is a `PATH.tsv` file (`source<TAB>target` per line) or two
line-aligned files `SOURCE_PATH,TARGET_PATH`. Corpora are usually files
concatenated by source or domain, so nothing here depends on line order:

Held-out sets. One pass over the file (`LocalCorpus.scan`) gives every usable
pair a keyed 64-bit hash (BLAKE2b with a fixed key, so every run on the same
file holds out the same pairs, whatever its seed; the sides are hashed in
sorted order, so a reverse-direction run holds out the same pairs too). The 2k distinct pairs with
the smallest hashes are a uniform sample of the whole file: the k smallest are
validation, the next k test, with k = min(held_out, 2.5% of the usable
pairs). A set given explicitly (`--validation`, `--test`) replaces its drawn
one. Training lines equal to any held-out pair are removed from training and
counted (`ReadStats.held_out_duplicates`). The count is exact without a
second pass: a pair among the k smallest hashes of the whole file is among
the k smallest of every prefix holding it, so each of its copies is seen
while it is a candidate.

Streaming. The scan keeps only the byte offset of every `STRIDE`-th line, not
the pairs. Training cuts the lines into `shards` contiguous ranges and reads
them all at once, one pair from each in turn (`tf.data` interleave over one
reader per range, in an order reshuffled every pass), so every stretch of
the stream holds pairs from all parts of the file; the pipeline's shuffle
buffer then mixes them further. A file concatenated from several domains is
never seen one domain at a time, and memory does not grow with the corpus.
"""

import functools
import hashlib
import heapq
import os
import random

import collections
import dataclasses

import tensorflow as tf

from keras_transformer.config import HELD_OUT, MAX_HELD_OUT_FRACTION

STRIDE = 1024  # lines between two kept offsets
_HASH_KEY = b"keras_transformer held-out v1"


@dataclasses.dataclass
class ReadStats:
    """Counts of training pairs read and of lines skipped. `skipped` maps a
    reason to a count; `held_out_duplicates` counts training lines removed
    because they repeat a validation or test pair."""

    read: int = 0
    skipped: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    held_out_duplicates: int = 0

    def skip(self, reason, count=1):
        self.skipped[reason] += count


def _decode(raw, stats):
    try:
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        stats.skip("undecodable")
        return None


def pair_key(source, target):
    """The text that decides whether two pairs are the same: stripped sides joined by TAB."""
    return f"{source}\t{target}"


def pair_hash(source, target):
    """Keyed 64-bit hash of a pair, the same on every machine and run, and the
    same for (target, source): a corpus and its reverse hold out the same pairs."""
    digest = hashlib.blake2b("\t".join(sorted((source, target))).encode("utf-8"), digest_size=8, key=_HASH_KEY)
    return int.from_bytes(digest.digest(), "big")


def _paths(spec):
    paths = spec.split(",") if "," in spec else [spec]
    if len(paths) > 2:
        raise ValueError(f"A local dataset is PATH.tsv or SOURCE,TARGET; got {spec!r}.")
    for path in paths:
        if not os.path.exists(path):
            raise FileNotFoundError(f"Dataset file {path!r} does not exist.")
    return paths


def _parse(raws, stats):
    """(source, target) from one TSV line or a pair of aligned lines, or None (counted in `stats`)."""
    if len(raws) == 1:
        line = _decode(raws[0], stats)
        if line is None:
            return None
        if "\t" not in line:
            stats.skip("no TAB")
            return None
        source, target = line.split("\t", 1)
        if "\t" in target:
            stats.skip("more than one TAB")
            return None
    else:
        source = _decode(raws[0], stats)
        target = None if source is None else _decode(raws[1], stats)
        if target is None:
            return None
    if not source.strip() or not target.strip():
        stats.skip("empty side")
        return None
    return source.strip(), target.strip()


def iter_lines(paths, offsets=None, count=None):
    """Raw lines of the (one or two) files as tuples, from `offsets` (one per
    file, default 0) for `count` lines (default: to the end). Two files of
    different lengths are an error."""
    files = [open(path, "rb") for path in paths]
    try:
        for f, offset in zip(files, offsets or [0] * len(files)):
            f.seek(offset)
        read = 0
        while count is None or read < count:
            raws = [f.readline() for f in files]
            ends = [raw == b"" for raw in raws]
            if all(ends):
                return
            if any(ends):
                raise ValueError(f"{paths[0]!r} and {paths[1]!r} have different numbers of lines; "
                                 "line-aligned files must have the same number of lines.")
            read += 1
            yield tuple(raws)
    finally:
        for f in files:
            f.close()


def read_held_out(spec):
    """The pairs of an explicit held-out set (PATH.tsv or SOURCE,TARGET), in file order."""
    stats = ReadStats()
    pairs = [pair for pair in map(lambda raws: _parse(raws, stats), iter_lines(_paths(spec))) if pair]
    if not pairs:
        raise ValueError(f"No usable sentence pairs in held-out set {spec!r}.")
    return pairs


class LocalCorpus:
    """One local corpus: its held-out sets and a streaming training split.

    Args:
        spec: `PATH.tsv` or `SOURCE_PATH,TARGET_PATH`.
        validation, test: explicit held-out sets (same forms); None draws
            that set from the corpus.
        held_out: pairs per drawn set, at most 2.5% of the corpus each.
        shards: contiguous line ranges read at once during training.

    Example:
    >>> corpus = LocalCorpus("corpus.tsv", test="wmt14.en,wmt14.de")
    >>> corpus.split("validation")  # list of (source, target)
    >>> corpus.train_dataset(seed=0)  # tf.data.Dataset of string pairs, one pass
    """

    def __init__(self, spec, validation=None, test=None, held_out=HELD_OUT, shards=64):
        if int(held_out) < 0:
            raise ValueError(f"held_out must be >= 0; got {held_out}.")
        self.spec, self.paths = spec, _paths(spec)
        self.explicit = {"validation": validation, "test": test}
        self.held_out, self.shards = int(held_out), int(shards)

    @functools.cached_property
    def _scan(self):
        """One pass over the corpus: offsets, the drawn held-out pairs, counts."""
        explicit = {split: read_held_out(spec) for split, spec in self.explicit.items() if spec}
        explicit_keys = {pair_key(*pair) for pairs in explicit.values() for pair in pairs}
        wanted = 2 * self.held_out if len(explicit) < 2 else 0
        stats = ReadStats()
        offsets, position = [], [0] * len(self.paths)
        heap, candidates = [], {}  # max-heap of (-hash, key) over the smallest distinct hashes
        explicit_copies = usable = lines = 0
        for raws in iter_lines(self.paths):
            if lines % STRIDE == 0:
                offsets.append(tuple(position))
            position = [p + len(raw) for p, raw in zip(position, raws)]
            lines += 1
            if lines % 1_000_000 == 0:
                print(f"  scanned {lines:,} lines of {self.spec}", flush=True)
            pair = _parse(raws, stats)
            if pair is None:
                continue
            usable += 1
            key = pair_key(*pair)
            if key in explicit_keys:
                explicit_copies += 1
                continue
            if not wanted:
                continue
            h = pair_hash(*pair)
            if key in candidates:
                candidates[key][1] += 1
            elif len(heap) < wanted or h < -heap[0][0]:
                candidates[key] = [h, 1, pair]
                heapq.heappush(heap, (-h, key))
                if len(heap) > wanted:
                    candidates.pop(heapq.heappop(heap)[1])
        drawn = sorted(candidates.values())  # by hash: a uniform random order
        k = min(self.held_out, int(MAX_HELD_OUT_FRACTION * usable))
        splits = {"validation": [], "test": []}
        for split in ("validation", "test"):
            if split in explicit:
                splits[split] = explicit[split]
            else:
                splits[split], drawn = [c[2] for c in drawn[:k]], drawn[k:]
        removed = {pair_key(*pair) for split in splits.values() for pair in split}
        # Copies beyond the one held out of each drawn pair, plus every copy of an explicit one.
        drawn_keys = removed - explicit_keys
        drawn_copies = sum(count for key, (_, count, _) in candidates.items() if key in drawn_keys)
        stats.held_out_duplicates = explicit_copies + drawn_copies - len(drawn_keys)
        stats.read = usable - explicit_copies - drawn_copies
        return {"offsets": offsets, "lines": lines, "splits": splits, "removed": removed, "stats": stats}

    @property
    def stats(self):
        """ReadStats of the training split: `read` usable training pairs,
        skips by reason, and `held_out_duplicates`."""
        return self._scan["stats"]

    def split(self, name):
        """The held-out pairs of "validation" or "test", as a list of (source, target)."""
        if name not in ("validation", "test"):
            raise ValueError(f"Unknown held-out split {name!r}; expected validation or test.")
        return list(self._scan["splits"][name])

    def shard_ranges(self):
        """[(first_line, line_count)], contiguous ranges of whole STRIDE blocks covering the file."""
        blocks = len(self._scan["offsets"])
        count = max(1, min(self.shards, blocks))
        edges = [round(i * blocks / count) for i in range(count + 1)]
        ranges = []
        for start, end in zip(edges, edges[1:]):
            last = min(end * STRIDE, self._scan["lines"])
            ranges.append((start * STRIDE, last - start * STRIDE))
        return ranges

    def iter_train(self, first_line=0, count=None):
        """Training pairs (str, str) of the given line range, held-out pairs left out."""
        scan = self._scan
        offsets = scan["offsets"][first_line // STRIDE] if scan["offsets"] else None
        removed, stats = scan["removed"], ReadStats()
        for raws in iter_lines(self.paths, offsets, count):
            pair = _parse(raws, stats)
            if pair is not None and pair_key(*pair) not in removed:
                yield pair

    def train_dataset(self, seed=0):
        """One pass over the training pairs as tf.data (source, target) strings:
        all shards read at once, one pair from each in turn, shards in an order
        that `seed` fixes and every repetition reshuffles."""
        ranges = self.shard_ranges()
        signature = (tf.TensorSpec((), tf.string), tf.TensorSpec((), tf.string))

        def read(index):
            first, count = ranges[int(index)]
            yield from self.iter_train(first, count)

        def reader(index):
            return tf.data.Dataset.from_generator(read, args=(index,), output_signature=signature)

        order = tf.data.Dataset.range(len(ranges)).shuffle(len(ranges), seed=seed, reshuffle_each_iteration=True)
        return order.interleave(reader, cycle_length=len(ranges), block_length=1)


def open_corpus(spec, validation=None, test=None, held_out=HELD_OUT):
    """The `LocalCorpus` for these arguments, scanned at most once per process
    however the arguments are passed."""
    return _open_corpus(spec, validation, test, int(held_out))


@functools.lru_cache(maxsize=8)
def _open_corpus(spec, validation, test, held_out):
    return LocalCorpus(spec, validation, test, held_out)


def reservoir_sample(items, k, seed=0):
    """A uniform sample of `k` items of an iterable of unknown length, in one
    pass and O(k) memory (Vitter's algorithm R); all of them if fewer."""
    rng = random.Random(seed)
    sample = []
    for i, item in enumerate(items):
        if i < k:
            sample.append(item)
        else:
            j = rng.randrange(i + 1)
            if j < k:
                sample[j] = item
    return sample
