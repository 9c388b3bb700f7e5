"""Token-budgeted, length-bucketed batches for `model.fit` (paper section 5.1).

Elements are `((source_ids, target_input_ids), target_output_ids)`, int32:
- source_ids: the source pieces + EOS;
- target_input_ids: BOS + the target pieces;
- target_output_ids: the target pieces + EOS.

Pairs are grouped by length into buckets. Every batch of bucket i is padded
to that bucket's length P_i (both sides), and holds floor(batch_tokens / P_i)
pairs, so a batch never holds more than `batch_tokens` tokens per side,
padding included, and `fit` sees at most one shape per bucket.

Notation: B pairs in a batch, P padded length.
"""

import collections
import dataclasses

import numpy as np
import tensorflow as tf

from keras_transformer.data.sources import nonempty
from keras_transformer.modeling.special_ids import BOS_ID, EOS_ID, PAD_ID


def bucket_boundaries(max_length, min_boundary=8, growth=1.1):
    """Bucket boundaries b_0 < b_1 < ... < max_length + 1, growing by ~`growth`.

    A pair of length L (the longer side) goes to the first bucket with
    L < b_i and is padded to b_i - 1. The last boundary is max_length + 1,
    so every kept pair fits a bucket.
    """
    if int(max_length) < 1:
        raise ValueError(f"max_length must be positive; got {max_length}.")
    bounds, b = [], min(int(min_boundary), int(max_length))
    while b <= max_length:
        bounds.append(b)
        b = max(b + 1, int(b * growth))
    bounds.append(int(max_length) + 1)
    return bounds


def bucket_batch_sizes(boundaries, batch_tokens):
    """Pairs per batch for each bucket (plus the unused overflow bucket)."""
    sizes = [int(batch_tokens) // (b - 1) if b > 1 else int(batch_tokens) for b in boundaries]
    if min(sizes) < 1:
        raise ValueError(
            f"batch_tokens={batch_tokens} is smaller than the longest bucket "
            f"({boundaries[-1] - 1} tokens); raise --batch-tokens or lower --max-length."
        )
    return sizes + [1]


def encode_pairs(pairs, tokenizer, chunk=1024):
    """(source, target) strings -> (source_ids + EOS, BOS + target_ids + EOS), int32 1-D.

    Tokenizes in chunks of `chunk` pairs, which is much faster than one op per pair.
    """
    def tokenize(sources, targets):
        eos = tf.fill([tf.shape(targets)[0], 1], EOS_ID)
        bos = tf.fill([tf.shape(targets)[0], 1], BOS_ID)
        source_ids = tokenizer.encode_sources(sources)  # ragged (chunk, None)
        target_ids = tf.concat([bos, tokenizer.tokenize(targets), eos], axis=1)
        # Dense rows plus lengths: unbatching ragged rows would give ragged
        # elements, which padded_batch does not take.
        return (source_ids.to_tensor(), source_ids.row_lengths(),
                target_ids.to_tensor(), target_ids.row_lengths())

    return (
        pairs.batch(chunk)
        .map(tokenize, num_parallel_calls=tf.data.AUTOTUNE)
        .unbatch()
        .map(lambda s, s_len, t, t_len: (s[:s_len], t[:t_len]), num_parallel_calls=tf.data.AUTOTUNE)
    )


def pair_length(source_ids, target_ids):
    """The bucketing length: the longer of the source and the target input."""
    return tf.maximum(tf.shape(source_ids)[0], tf.shape(target_ids)[0] - 1)


def _split_target(source_ids, target_ids):
    return (source_ids, target_ids[:-1]), target_ids[1:]


def _example_length(inputs, target_output_ids):
    source_ids, target_input_ids = inputs
    return tf.maximum(tf.shape(source_ids)[0], tf.shape(target_input_ids)[0])


_PADDING = ((PAD_ID, PAD_ID), PAD_ID)


def make_batches(
    pairs,
    tokenizer,
    batch_tokens,
    max_length,
    training,
    seed=0,
    shuffle_buffer=200_000,
    input_context=None,
    drop_remainder=None,
):
    """A tf.data pipeline of bucketed batches from a dataset of string pairs.

    Args:
        pairs: tf.data.Dataset of (source, target) tf.string scalars.
        tokenizer: a `keras_transformer.data.tokenizer.Tokenizer`.
        batch_tokens: int. Most tokens per side in one batch, padding included.
            Per replica when `input_context` is given (see `distributed_batches`).
        max_length: int. Pairs longer than this (in pieces, either side) are dropped.
        training: bool. Shuffle (seeded) and repeat forever, and drop partial
            batches so that every batch of a bucket has the same shape.
        seed: int. Shuffle seed.
        shuffle_buffer: int. Pairs in the shuffle buffer.
        input_context: tf.distribute.InputContext; shards the pairs per input pipeline.
        drop_remainder: bool. Drop each bucket's last partial batch; defaults
            to `training`.
    """
    if input_context is not None and input_context.num_input_pipelines > 1:
        pairs = pairs.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    pairs = nonempty(pairs)
    if training:
        pairs = pairs.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True).repeat()
    encoded = encode_pairs(pairs, tokenizer)
    encoded = encoded.filter(lambda s, t: pair_length(s, t) <= max_length)
    examples = encoded.map(_split_target, num_parallel_calls=tf.data.AUTOTUNE)
    boundaries = bucket_boundaries(max_length)
    batches = examples.bucket_by_sequence_length(
        element_length_func=_example_length,
        bucket_boundaries=boundaries,
        bucket_batch_sizes=bucket_batch_sizes(boundaries, batch_tokens),
        padding_values=_PADDING,
        pad_to_bucket_boundary=True,
        drop_remainder=training if drop_remainder is None else drop_remainder,
    )
    if training:
        batches = batches.shuffle(64, seed=seed + 1)
    return batches.with_options(_options()).prefetch(tf.data.AUTOTUNE)


def _options():
    """Deterministic order, and no autotuning thread for any pass."""
    options = tf.data.Options()
    options.deterministic = True
    # Deleting an iterator waits out the autotuning thread's sleep, which doubles
    # up to a minute (35 s idle after a budgeted run's validation). Without it the
    # maps use one thread per core and the small preset trains as fast or faster.
    options.autotune.enabled = False
    return options


def distributed_batches(strategy, make_pairs, tokenizer, global_batch_tokens, max_length, training, seed=0):
    """Per-replica batches through `strategy.distribute_datasets_from_function`.

    `global_batch_tokens` is split evenly over the replicas; each input
    pipeline (one per worker) reads its own shard of `make_pairs()`.
    """
    replicas = strategy.num_replicas_in_sync
    per_replica = int(global_batch_tokens) // replicas

    def dataset_fn(input_context):
        return make_batches(make_pairs(), tokenizer, per_replica, max_length, training,
                            seed=seed + input_context.input_pipeline_id, input_context=input_context)

    return strategy.distribute_datasets_from_function(dataset_fn)


@dataclasses.dataclass
class BatchStats:
    """What the batches of one pass over the data look like."""

    batches: int = 0
    pairs: int = 0
    real_tokens: int = 0
    padded_tokens: int = 0
    max_batch_tokens: int = 0
    shapes: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    @property
    def padding_efficiency(self):
        """Non-padding tokens / all tokens, over both sides."""
        return self.real_tokens / max(self.padded_tokens, 1)

    def add(self, source, target_out):
        source, target_out = np.asarray(source), np.asarray(target_out)
        self.batches += 1
        self.pairs += source.shape[0]
        self.real_tokens += int((source != PAD_ID).sum() + (target_out != PAD_ID).sum())
        self.padded_tokens += source.size + target_out.size
        self.max_batch_tokens = max(self.max_batch_tokens, source.size, target_out.size)
        self.shapes[(source.shape, target_out.shape)] += 1


def batch_stats(batches):
    """BatchStats over one pass of a finite dataset of ((source, target_in), target_out)."""
    stats = BatchStats()
    for (source, _), target_out in batches.as_numpy_iterator():
        stats.add(source, target_out)
    return stats


def naive_batches(pairs, tokenizer, max_length, batch_size):
    """The baseline: fixed-size batches in corpus order, padded to their longest pair."""
    encoded = encode_pairs(nonempty(pairs), tokenizer)
    encoded = encoded.filter(lambda s, t: pair_length(s, t) <= max_length)
    return encoded.map(_split_target).padded_batch(batch_size, padding_values=_PADDING)


def count_lengths(pairs, tokenizer, max_length):
    """(kept, over_long, empty) pair counts for one pass over `pairs`."""
    empty = 0
    lengths = []
    for (source_ids, target_ids), _ in tf.data.Dataset.zip(
        (encode_pairs(pairs, tokenizer), pairs)
    ).as_numpy_iterator():
        if len(source_ids) <= 1 or len(target_ids) <= 2:
            empty += 1
        else:
            lengths.append(max(len(source_ids), len(target_ids) - 1))
    lengths = np.asarray(lengths)
    return int((lengths <= max_length).sum()), int((lengths > max_length).sum()), empty
