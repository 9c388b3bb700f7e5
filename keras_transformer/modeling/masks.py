"""Attention masks: the one place where they are built.

Convention used everywhere in the package: masks are boolean and True means
"may attend". Masks are combined with AND. Attention layers accept any mask
that broadcasts to (B, T, S).

Notation: B batch, S key (source) length, T query (target) length.
"""

from keras import ops

from keras_transformer.modeling.special_ids import PAD_ID


def padding_mask(ids, pad_id=PAD_ID):
    """True where `ids` holds a real token. (B, S) int -> (B, S) bool."""
    return ops.not_equal(ids, pad_id)


def key_padding_mask(ids, pad_id=PAD_ID):
    """Mask that hides padded keys from every query. (B, S) -> (B, 1, S)."""
    return ops.expand_dims(padding_mask(ids, pad_id), axis=1)  # (B, 1, S)


def causal_mask(query_length, key_length, offset=0):
    """Query i (at absolute position offset + i) may see keys 0..offset + i.

    `offset` is the position of the first query; it is non-zero when decoding
    one token at a time against a key/value cache. Returns (1, T, S) bool.
    """
    query_positions = ops.arange(query_length, dtype="int32") + ops.cast(offset, "int32")
    key_positions = ops.arange(key_length, dtype="int32")
    mask = ops.greater_equal(query_positions[:, None], key_positions[None, :])  # (T, S)
    return mask[None, :, :]  # (1, T, S)


def merge_masks(*masks):
    """AND of the given masks; None entries are skipped. Returns None if all are None."""
    merged = None
    for mask in masks:
        if mask is None:
            continue
        mask = ops.cast(mask, "bool")
        merged = mask if merged is None else ops.logical_and(merged, mask)
    return merged
