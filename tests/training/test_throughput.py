import pytest

from keras_transformer.training.throughput import Throughput


class CountingTokens:
    """A stand-in for MaskedAccuracy's token counter that counts its device-to-host reads."""

    def __init__(self):
        self.value, self.reads = 0.0, 0

    def numpy(self):
        self.reads += 1
        return self.value


class Metric:
    def __init__(self):
        self.tokens = CountingTokens()


def test_the_token_count_is_read_only_on_the_batches_that_report(monkeypatch):
    clock = iter(float(t) for t in range(1000))
    monkeypatch.setattr("keras_transformer.training.throughput.time.perf_counter", lambda: next(clock))
    metric = Metric()
    callback = Throughput(metric, every=10)
    callback.on_epoch_begin(0)
    logs_seen = []
    for batch in range(25):
        metric.tokens.value += 100.0  # 100 target tokens per batch
        logs = {}
        callback.on_train_batch_end(batch, logs)
        logs_seen.append(logs)
    assert metric.tokens.reads == 3  # batches 0 (the start), 10 and 20; not 25
    # The clock ticks once per read: 10 batches and 1,000 tokens in 1 "second" each time.
    assert logs_seen[10] == {"tokens_per_sec": 1000.0, "sec_per_step": 0.1}
    assert logs_seen[24] == logs_seen[20] == {"tokens_per_sec": 2000.0 / 2, "sec_per_step": 2 / 20}
    assert logs_seen[5] == {"tokens_per_sec": 0.0, "sec_per_step": 0.0}


def test_every_must_be_positive():
    with pytest.raises(ValueError, match="every must be at least 1; got 0"):
        Throughput(Metric(), every=0)
