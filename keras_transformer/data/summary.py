"""`scripts/train.py --inspect-data`: what the data pipeline makes of a dataset.

`summarize(data, tokenizer)` takes the run's `config.DataSettings`."""

from keras_transformer.data import pipeline, sources


def summarize(data, tokenizer, split="train"):
    """One pass over `split`: counts, skips by reason, batches, padding efficiency.

    Batches are made as for training (same buckets and budget) but without
    shuffling or repeating, and each bucket's last partial batch is kept.
    Training drops partial batches, so it sees one shape per padded length:
    that count is the "distinct batch shapes". The baseline is naive
    batching: as many pairs per batch as the bucketed batches hold on
    average, in corpus order, padded to each batch's longest pair.
    Returns the summary as a dict.
    """
    pairs, read_stats = sources.load_split(data, split)
    kept, over_long, empty = pipeline.count_lengths(pairs, tokenizer, data.max_length)
    skipped = dict(read_stats.skipped)
    if empty:
        skipped["empty side"] = skipped.get("empty side", 0) + empty
    if read_stats.held_out_duplicates:
        skipped["copy of a validation/test pair"] = read_stats.held_out_duplicates
    if over_long:
        skipped[f"over-long (> {data.max_length} pieces)"] = over_long
    batches = pipeline.make_batches(pairs, tokenizer, data.batch_tokens, data.max_length, training=False)
    stats = pipeline.batch_stats(batches)
    naive_size = max(1, round(stats.pairs / max(stats.batches, 1)))
    naive = pipeline.batch_stats(pipeline.naive_batches(pairs, tokenizer, data.max_length, naive_size))
    return {
        "dataset": data.dataset,
        "split": split,
        "pairs_read": kept + over_long,
        "pairs_skipped": skipped,
        "pairs_kept": kept,
        "vocab_size": tokenizer.vocab_size,
        "batch_tokens": data.batch_tokens,
        "batches": stats.batches,
        "pairs_in_batches": stats.pairs,
        "largest_batch_tokens": stats.max_batch_tokens,
        "padding_efficiency": stats.padding_efficiency,
        "naive_batch_size": naive_size,
        "naive_padding_efficiency": naive.padding_efficiency,
        "distinct_batch_shapes": len({source_shape[1] for source_shape, _ in stats.shapes}),
        "buckets": len(pipeline.bucket_boundaries(data.max_length)),
    }


def format_summary(summary):
    lines = [
        f"dataset:                {summary['dataset']} ({summary['split']})",
        f"pairs read:             {summary['pairs_read']}",
        f"pairs kept:             {summary['pairs_kept']}",
    ]
    skipped = summary["pairs_skipped"]
    lines.append(f"pairs skipped:          {sum(skipped.values())}")
    for reason, count in sorted(skipped.items()):
        lines.append(f"  {reason}: {count}")
    lines += [
        f"vocabulary size:        {summary['vocab_size']}",
        f"token budget per batch: {summary['batch_tokens']} per side "
        f"(largest batch: {summary['largest_batch_tokens']})",
        f"batches:                {summary['batches']} ({summary['pairs_in_batches']} pairs)",
        f"padding efficiency:     {summary['padding_efficiency']:.3f} "
        f"(naive batches of {summary['naive_batch_size']}: {summary['naive_padding_efficiency']:.3f})",
        f"distinct batch shapes:  {summary['distinct_batch_shapes']} (buckets: {summary['buckets']})",
    ]
    return "\n".join(lines)
