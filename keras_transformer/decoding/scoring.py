"""Teacher-forced scores of given translations, for filtering noisy parallel data and reranking.

The model (or an ensemble, combined as in `step.combine_log_probs`)
reads BOS + the target and predicts the target + EOS, exactly as in
training; the log-probability of each predicted piece is summed. The
length-normalised score divides that sum by the GNMT penalty of beam search
((5 + length) / 6)^alpha, length counting EOS, so for beam search's own
output it equals the score beam search reported.

Notation: B pairs, S source pieces, T target pieces, V vocabulary.
"""

import numpy as np
import tensorflow as tf

from keras_transformer.config import PAPER_ALPHA
from keras_transformer.decoding.batching import in_length_order
from keras_transformer.decoding.search import length_penalty, lengths
from keras_transformer.decoding.step import check_ensemble, combine_log_probs
from keras_transformer.modeling.special_ids import BOS_ID, EOS_ID, PAD_ID


def token_log_probs(model, source_ids, target_ids):
    """log P of each target piece and of the final EOS.

    model: a Transformer or a list of them (an ensemble).
    source_ids: (B, S) pieces + EOS, 0-padded. target_ids: (B, T) pieces
    without BOS or EOS, 0-padded. Returns (B, T + 1) float32, 0 after EOS.
    """
    models = check_ensemble(model if isinstance(model, (list, tuple)) else [model])
    target_ids = tf.convert_to_tensor(target_ids, tf.int32)
    batch = tf.shape(target_ids)[0]
    pieces = lengths(target_ids)  # (B,)
    padded = tf.concat([target_ids, tf.fill([batch, 1], PAD_ID)], axis=1)  # (B, T+1)
    positions = tf.range(tf.shape(padded)[1])[None, :]  # (1, T+1)
    target_out = tf.where(positions == pieces[:, None], EOS_ID, padded)  # pieces + EOS
    target_in = tf.concat([tf.fill([batch, 1], BOS_ID), target_ids], axis=1)  # BOS + pieces
    log_probs = tf.stack([tf.nn.log_softmax(m((source_ids, target_in), training=False)) for m in models])
    combined = combine_log_probs(log_probs) if len(models) > 1 else log_probs[0]  # (B, T+1, V)
    picked = tf.gather(combined, target_out, batch_dims=2)  # (B, T+1)
    return tf.where(positions <= pieces[:, None], picked, 0.0)


def score_ids(model, source_ids, target_ids, alpha=PAPER_ALPHA):
    """Per-pair scores of given targets: a dict of (B,) numpy arrays

    - "log_prob": log P(target + EOS | source), summed over pieces;
    - "tokens": pieces scored, EOS included;
    - "per_token": log_prob / tokens;
    - "normalized": log_prob / ((5 + tokens) / 6)^alpha, beam search's score.
    """
    per_token = token_log_probs(model, source_ids, target_ids)
    tokens = lengths(tf.convert_to_tensor(target_ids)) + 1  # EOS included
    log_prob = tf.reduce_sum(per_token, axis=1)
    return {
        "log_prob": log_prob.numpy(),
        "tokens": tokens.numpy(),
        "per_token": (log_prob / tf.cast(tokens, tf.float32)).numpy(),
        "normalized": (log_prob / length_penalty(tokens, float(alpha))).numpy(),
    }


def score_pairs(model, tokenizer, sources, targets, alpha=PAPER_ALPHA, batch_size=64, progress=True):
    """`score_ids` of lists of source and target strings, tokenized as in
    training (no truncation). Pairs are batched by length and put back in
    order. Returns the same dict of (N,) arrays."""
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} sources but {len(targets)} targets.")

    def run(pairs):
        source_ids = tokenizer.encode_sources(tf.constant([s for s, _ in pairs])).to_tensor()  # (B, S)
        target_ids = tokenizer.tokenize(tf.constant([t for _, t in pairs])).to_tensor()  # (B, T), PAD 0
        scores = score_ids(model, source_ids, target_ids, alpha)
        return [{name: values[i] for name, values in scores.items()} for i in range(len(pairs))]

    pairs = list(zip(sources, targets))
    rows = in_length_order(run, pairs, [len(s) + len(t) for s, t in pairs], batch_size,
                           "Scored {done}/{total} pairs" if progress else None)
    types = {"log_prob": np.float32, "tokens": np.int32, "per_token": np.float32, "normalized": np.float32}
    return {name: np.array([row[name] for row in rows], dtype) for name, dtype in types.items()}
