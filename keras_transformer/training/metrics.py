"""Token-level metrics that ignore padding."""

import keras
from keras import ops

from keras_transformer.modeling.special_ids import PAD_ID


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedAccuracy(keras.metrics.Metric):
    """Fraction of non-padding target tokens whose arg-max prediction is right.

    Keeps two sums, correct tokens and real tokens, so batches (and replicas)
    count in proportion to their tokens, not their sentences. `tokens` is the
    number of real target tokens seen since the last reset (the progress
    bar's tokens/s comes from it).

    Args:
        pad_id: int. Label id to ignore.
        name: str.
    """

    def __init__(self, pad_id=PAD_ID, name="masked_accuracy", **kwargs):
        super().__init__(name=name, **kwargs)
        self.pad_id = int(pad_id)
        self.correct = self.add_variable((), initializer="zeros", name="correct", aggregation="sum")
        self.tokens = self.add_variable((), initializer="zeros", name="tokens", aggregation="sum")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.cast(y_true, "int32")
        weights = ops.cast(ops.not_equal(y_true, self.pad_id), "float32")  # (B, T)
        if sample_weight is not None:
            weights = weights * ops.cast(sample_weight, "float32")
        correct = ops.cast(ops.equal(ops.argmax(y_pred, axis=-1), y_true), "float32")  # (B, T)
        self.correct.assign_add(ops.sum(correct * weights))
        self.tokens.assign_add(ops.sum(weights))

    def result(self):
        return ops.divide_no_nan(self.correct, self.tokens)

    def reset_state(self):
        self.correct.assign(0.0)
        self.tokens.assign(0.0)

    def get_config(self):
        return {**super().get_config(), "pad_id": self.pad_id}
