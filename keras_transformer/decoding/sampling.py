"""Sampling filters: temperature, top-k and nucleus (top-p) over next-token logits."""

import tensorflow as tf

# Scores of impossible tokens: finite, so arithmetic on them stays finite.
NEG_INF = -1.0e9


def filter_logits(logits, top_k=0, top_p=1.0, temperature=1.0):
    """The sampling distribution's logits: divided by `temperature`, then all
    but the `top_k` largest (0: all) and all outside the smallest set whose
    probability reaches `top_p` (nucleus sampling, Holtzman et al., 2020) set
    to NEG_INF. (B, V) float32 -> (B, V) float32."""
    logits = logits / temperature
    if top_k and (logits.shape[-1] is None or top_k < logits.shape[-1]):
        kth_largest = tf.math.top_k(logits, k=top_k).values[:, -1:]  # (B, 1)
        logits = tf.where(logits < kth_largest, NEG_INF, logits)
    if top_p < 1.0:
        descending = tf.sort(logits, axis=-1, direction="DESCENDING")  # (B, V)
        probs = tf.nn.softmax(descending)
        before = tf.math.cumsum(probs, axis=-1, exclusive=True)  # probability of the larger ones
        kept = tf.where(before < top_p, descending, tf.float32.max)  # the first always stays
        logits = tf.where(logits < tf.reduce_min(kept, axis=-1, keepdims=True), NEG_INF, logits)
    return logits



def check_sampling(top_k=0, top_p=1.0, temperature=1.0):
    """ValueError naming the first sampling setting outside its valid range."""
    if int(top_k) != top_k or top_k < 0:
        raise ValueError(f"sampling top-k must be a whole number >= 0 (0: the full distribution); got {top_k}.")
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"sampling top-p must be in (0, 1]; got {top_p}.")
    if not temperature > 0.0:
        raise ValueError(f"sampling temperature must be > 0; got {temperature}.")
