import subprocess
import sys

import keras
import numpy as np
import pytest

import keras_transformer as kt
from tests.conftest import ROOT

RNG = np.random.default_rng(0)
LABELS = np.array([[5, 3, 9, 0, 0], [7, 0, 0, 0, 0], [4, 4, 4, 4, 2]], "int32")
LOGITS = RNG.normal(size=(3, 5, 11)).astype("float32") * 3


def numpy_reference(labels, logits, eps):
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    total, count = 0.0, 0
    for b, t in zip(*np.nonzero(labels)):
        y = labels[b, t]
        total += (1 - eps) * -logp[b, t, y] + eps * -logp[b, t].mean()
        count += 1
    return total / count


def test_without_smoothing_it_is_sparse_cross_entropy_over_real_tokens():
    loss = kt.LabelSmoothedCrossEntropy(label_smoothing=0.0)(LABELS, LOGITS)
    ce = keras.losses.sparse_categorical_crossentropy(LABELS, LOGITS, from_logits=True)
    mask = LABELS != 0
    assert float(loss) == pytest.approx(float(np.sum(np.asarray(ce)[mask]) / mask.sum()), rel=1e-6)


@pytest.mark.parametrize("eps", [0.1, 0.3])
def test_with_smoothing_it_equals_the_numpy_reference(eps):
    loss = kt.LabelSmoothedCrossEntropy(label_smoothing=eps)(LABELS, LOGITS)
    assert float(loss) == pytest.approx(numpy_reference(LABELS, LOGITS, eps), rel=1e-6)


def test_bfloat16_logits_are_computed_in_float32():
    loss = kt.LabelSmoothedCrossEntropy()(LABELS, keras.ops.cast(LOGITS, "bfloat16"))
    assert loss.dtype == "float32"
    ref = numpy_reference(LABELS, np.asarray(keras.ops.cast(keras.ops.cast(LOGITS, "bfloat16"), "float32")), 0.1)
    assert float(loss) == pytest.approx(ref, rel=1e-5)


def test_fit_reports_the_token_mean_not_a_masked_keras_average():
    model = kt.Transformer.from_preset("tiny", vocab_size=11, dropout=0.0)
    source = np.array([[3, 4, 5, 0], [6, 0, 0, 0], [7, 8, 9, 10]], "int32")
    target_in = np.array([[1, 5, 3, 9, 0], [1, 7, 0, 0, 0], [1, 4, 4, 4, 4]], "int32")
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss=kt.LabelSmoothedCrossEntropy(0.1))
    history = model.fit((source, target_in), LABELS, batch_size=3, epochs=1, verbose=0)
    logits = np.asarray(model((source, target_in), training=False))
    assert history.history["loss"][0] == pytest.approx(numpy_reference(LABELS, logits, 0.1), rel=1e-5)


def test_masked_accuracy_counts_real_tokens_only():
    metric = kt.MaskedAccuracy()
    predictions = np.zeros((3, 5, 11), "float32")
    predictions[0, 0, 5] = predictions[0, 1, 3] = 1  # 2 of 3 right in row 0
    predictions[2, :, 4] = 1  # 4 of 5 right in row 2 (last label is 2)
    metric.update_state(LABELS, predictions)
    assert float(metric.result()) == pytest.approx(6 / 9)
    assert float(metric.tokens) == 9
    metric.update_state(LABELS[1:2], predictions[1:2])  # one more token, wrong
    assert float(metric.result()) == pytest.approx(6 / 10) and float(metric.tokens) == 10


def test_rejects_bad_smoothing():
    with pytest.raises(ValueError, match="label_smoothing must be in \\[0, 1\\); got 1.0"):
        kt.LabelSmoothedCrossEntropy(label_smoothing=1.0)


@pytest.mark.slow
def test_mirrored_step_over_8_replicas_equals_one_device_step_with_uneven_padding(tmp_path):
    """Runs tests/helpers/mirrored_step.py, which needs 8 logical CPUs set before TF starts."""
    result = subprocess.run(
        [sys.executable, "-m", "tests.helpers.mirrored_step", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    single = np.load(tmp_path / "single.npz")
    initial = np.load(tmp_path / "initial.npz")
    # "mirrored": Keras splits one global batch; "bucketed": every replica gets
    # its own batch, of its own shape, as token-bucketed data gives them.
    for run in ("mirrored", "bucketed"):
        other = np.load(tmp_path / f"{run}.npz")
        assert sorted(single) == sorted(other)
        for name in single:
            np.testing.assert_allclose(other[name], single[name], rtol=1e-5, atol=1e-7, err_msg=f"{run}: {name}")
        # The updates themselves agree, so this is not just "both barely moved".
        delta_single = np.concatenate([(single[n] - initial[n]).ravel() for n in single])
        delta_other = np.concatenate([(other[n] - initial[n]).ravel() for n in single])
        assert np.linalg.norm(delta_single) > 1e-2
        assert np.linalg.norm(delta_other - delta_single) < 1e-4 * np.linalg.norm(delta_single), run
