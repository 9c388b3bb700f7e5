"""The `Throughput` callback: target tokens per second and seconds per step in the logs."""

import time

import keras


class Throughput(keras.callbacks.Callback):
    """Adds `tokens_per_sec` (non-padding target tokens) and `sec_per_step` to the logs.

    It reads the token count that `MaskedAccuracy` keeps, so it costs no extra
    metric, and works the figures out only on the batches where it reports:
    the first of each epoch, then every `every` batches. Keras' progress
    bar, which runs after it, shows both.

    That does not save a device-to-host copy per batch: on the TensorFlow
    backend Keras 3.15 converts every batch's logs to Python numbers
    whatever the callbacks do (`IS_THREAD_SAFE = False` turns its
    asynchronous callback dispatch off). Keras' lever against that sync is
    `steps_per_execution`, several updates per call into the graph.
    """

    def __init__(self, accuracy_metric, every=10):
        super().__init__()
        if int(every) < 1:
            raise ValueError(f"every must be at least 1; got {every}.")
        self.accuracy_metric = accuracy_metric
        self.every = int(every)

    def on_epoch_begin(self, epoch, logs=None):
        self._start = None  # set after the first step, which includes tracing
        self._figures = {"tokens_per_sec": 0.0, "sec_per_step": 0.0}

    def _tokens(self):
        return float(self.accuracy_metric.tokens.numpy())

    def on_train_batch_end(self, batch, logs=None):
        if self._start is None:
            tokens = self._tokens()  # waits for the step: the clock starts after it
            self._start, self._start_batch, self._start_tokens = time.perf_counter(), batch, tokens
        elif (batch - self._start_batch) % self.every == 0:
            tokens = self._tokens()
            elapsed = max(time.perf_counter() - self._start, 1e-9)
            self._figures = {
                "tokens_per_sec": (tokens - self._start_tokens) / elapsed,
                "sec_per_step": elapsed / (batch - self._start_batch),
            }
        if logs is not None:
            logs.update(self._figures)
