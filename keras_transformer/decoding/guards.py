"""Decoding guards against repeated output: a repetition penalty and n-gram blocking.

Both change a step's next-token logits, given the tokens each row has
produced so far, before the search turns them into log-probabilities. They
mean what CTranslate2's `repetition_penalty` and `no_repeat_ngram_size`
mean, so a model exported there behaves the same:

- repetition penalty P (Keskar et al., 2019, "CTRL"): the logit of every
  token the row has already produced is divided by P if it is positive and
  multiplied by P if not (P > 1 makes repeating less likely; 1 is off);
- n-gram blocking N: a token that would complete an N-gram the row has
  already produced is impossible (0 is off). With N = 1 no token repeats.

Off (the defaults), `make_guard` returns None and the searches add no
operation at all, so their results are the same to the bit.

Notation: R rows (sentences, or sentences x beams), T tokens produced so
far, V vocabulary.
"""

import tensorflow as tf

from keras_transformer.config import check_guards  # the settings' valid ranges, defined with the settings
from keras_transformer.decoding.sampling import NEG_INF

__all__ = ["block_repeated_ngrams", "check_guards", "make_guard", "penalize_repetitions"]


def _token_mask(tokens, keep, vocab):
    """(R, V) bool: True at the ids of `tokens` (R, T) where `keep` (R, T) is True."""
    rows = tf.broadcast_to(tf.range(tf.shape(tokens)[0])[:, None], tf.shape(tokens))  # (R, T)
    at = tf.boolean_mask(tf.stack([rows, tokens], axis=-1), keep)  # (hits, 2)
    hits = tf.ones([tf.shape(at)[0]], tf.bool)
    return tf.scatter_nd(at, hits, tf.stack([tf.shape(tokens)[0], vocab]))  # duplicates: any True stays True


def penalize_repetitions(logits, produced, penalty):
    """(R, V) logits with those of the `produced` (R, T) tokens penalised."""
    seen = _token_mask(produced, tf.ones_like(produced, tf.bool), tf.shape(logits)[1])  # (R, V)
    penalised = tf.where(logits < 0, logits * penalty, logits / penalty)
    return tf.where(seen, penalised, logits)


def block_repeated_ngrams(logits, produced, n):
    """(R, V) logits where every token that would complete an `n`-gram already
    in `produced` (R, T) is NEG_INF."""
    length = tf.shape(produced)[1]
    starts = tf.maximum(length - n + 1, 0)  # n-grams produced so far
    # An earlier n-gram matches if its first n - 1 tokens are the last n - 1 produced.
    match = tf.ones([tf.shape(produced)[0], starts], tf.bool)  # (R, starts)
    for offset in range(n - 1):
        earlier = produced[:, offset:offset + starts]  # (R, starts)
        latest = produced[:, length - n + 1 + offset][:, None]  # (R, 1)
        match = tf.logical_and(match, tf.equal(earlier, latest))
    completing = produced[:, n - 1:n - 1 + starts]  # (R, starts): the token that followed each match
    banned = _token_mask(completing, match, tf.shape(logits)[1])  # (R, V)
    return tf.where(banned, NEG_INF, logits)


def make_guard(no_repeat_ngram_size=0, repetition_penalty=1.0):
    """`guard(logits (R, V) float32, produced (R, T) int32) -> logits`, or None when both are off."""
    check_guards(no_repeat_ngram_size, repetition_penalty)
    n, penalty = int(no_repeat_ngram_size), float(repetition_penalty)
    if not n and penalty == 1.0:
        return None

    def guard(logits, produced):
        if penalty != 1.0:
            logits = penalize_repetitions(logits, produced, penalty)
        if n:
            logits = tf.cond(tf.shape(produced)[1] >= n - 1, lambda: block_repeated_ngrams(logits, produced, n),
                             lambda: logits)
        return logits

    return guard
