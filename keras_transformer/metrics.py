"""Token-level metrics that ignore padding."""

import keras
from keras import ops

from keras_transformer.masks import PAD_ID


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedAccuracy(keras.metrics.Mean):
    """Fraction of non-padding target tokens whose arg-max prediction is right.

    Every real token has weight 1, so batches (and replicas) count in
    proportion to their tokens, not their sentences.

    Args:
        pad_id: int. Label id to ignore.
        name: str.
    """

    def __init__(self, pad_id=PAD_ID, name="masked_accuracy", **kwargs):
        super().__init__(name=name, **kwargs)
        self.pad_id = int(pad_id)

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.cast(y_true, "int32")
        correct = ops.cast(ops.equal(ops.argmax(y_pred, axis=-1), y_true), "float32")  # (B, T)
        weights = ops.cast(ops.not_equal(y_true, self.pad_id), "float32")  # (B, T)
        if sample_weight is not None:
            weights = weights * ops.cast(sample_weight, "float32")
        return super().update_state(correct, sample_weight=weights)

    def get_config(self):
        return {**super().get_config(), "pad_id": self.pad_id}
