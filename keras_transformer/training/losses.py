"""Label-smoothed cross-entropy normalised by the global number of target tokens.

Notation: B batch, T target length, V vocabulary.

How the normalisation works under tf.distribute
------------------------------------------------
Keras averages per-replica losses: with the default reduction each replica
returns its own mean, Keras divides it by the number of replicas N, and the
gradients are summed across replicas. The update is then the mean of the
replicas' means, which over-weights tokens on replicas that hold few of them
(for example, a replica whose batch is mostly padding).

This loss returns, on each replica, the sum of its token losses divided by
the token count of the *global* batch (an all-reduce over replicas of the
local counts), with reduction "sum", which Keras does not rescale. Summing
the replicas' gradients then gives exactly the gradient of
sum(all token losses) / (all tokens): the same update as one device taking
the whole global batch.
"""

import keras
import tensorflow as tf
from keras import ops

from keras_transformer.modeling.special_ids import PAD_ID


def global_sum(value):
    """Sum of `value` over all replicas in sync; `value` itself outside tf.distribute."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce(tf.distribute.ReduceOp.SUM, value)


def label_smoothed_nll(labels, logits, label_smoothing):
    """Per-token (1 - eps) * NLL + eps * mean_v(-log p_v), in float32.

    labels (B, T) int, logits (B, T, V). No one-hot tensor is built:
    -log p_y = logsumexp(logits) - logits[y], and the mean over the vocabulary
    of -log p_v = logsumexp(logits) - mean(logits).
    """
    logits = ops.cast(logits, "float32")
    log_normalizer = ops.logsumexp(logits, axis=-1)  # (B, T)
    labels = ops.cast(labels, "int32")
    target_logit = ops.take_along_axis(logits, labels[..., None], axis=-1)[..., 0]  # (B, T)
    nll = log_normalizer - target_logit  # (B, T)
    if not label_smoothing:
        return nll
    uniform = log_normalizer - ops.mean(logits, axis=-1)  # (B, T)
    return (1.0 - label_smoothing) * nll + label_smoothing * uniform


@keras.saving.register_keras_serializable(package="keras_transformer")
class LabelSmoothedCrossEntropy(keras.losses.Loss):
    """Label-smoothed sparse cross-entropy over non-padding target tokens.

    Equals sum over real tokens of (1 - eps) * NLL + eps * mean_v(-log p_v),
    divided by the number of real tokens in the global batch (see the module
    docstring). Padding (id `pad_id`) contributes nothing.

    With gradient accumulation each micro-batch is normalised by its own
    token count, so accumulated updates equal one large step exactly when the
    micro-batches hold equal numbers of tokens (token-budgeted batches hold
    nearly equal numbers).

    Args:
        label_smoothing: float in [0, 1). 0.1 in the paper.
        pad_id: int. Label id to ignore.
        name: str.

    Call arguments:
        y_true: (B, T) int labels.
        y_pred: (B, T, V) logits (any float dtype; computed in float32).

    Example:
    >>> loss = LabelSmoothedCrossEntropy(label_smoothing=0.1)
    """

    def __init__(self, label_smoothing=0.1, pad_id=PAD_ID, name="label_smoothed_cross_entropy", **kwargs):
        kwargs.pop("reduction", None)
        super().__init__(name=name, reduction="sum", **kwargs)
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1); got {label_smoothing}.")
        self.label_smoothing = float(label_smoothing)
        self.pad_id = int(pad_id)

    def call(self, y_true, y_pred):
        per_token = label_smoothed_nll(y_true, y_pred, self.label_smoothing)  # (B, T)
        weights = ops.cast(ops.not_equal(y_true, self.pad_id), "float32")  # (B, T)
        tokens = global_sum(ops.sum(weights))
        return per_token * weights / ops.maximum(tokens, 1.0)  # summed by reduction="sum"

    def get_config(self):
        config = super().get_config()
        config.pop("reduction", None)
        config.update({"label_smoothing": self.label_smoothing, "pad_id": self.pad_id})
        return config
