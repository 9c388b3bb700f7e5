import os
import subprocess
import sys

import numpy as np
import pytest

import keras_transformer as kt
from keras_transformer.run_dir import RunDir
from keras_transformer.training import checkpoints
from tests.conftest import ROOT


def tiny_model(**overrides):
    model = kt.Transformer.from_preset("tiny", vocab_size=23, **overrides)
    model.build()
    return model


@pytest.mark.parametrize("depths", [{}, {"num_encoder_layers": 3, "num_decoder_layers": 1}])
def test_averaging_yields_the_element_wise_mean(depths, tmp_path):
    model = tiny_model(**depths)
    rng = np.random.default_rng(0)
    saved, run_dir = [], RunDir(tmp_path)
    os.makedirs(run_dir.checkpoint_dir)
    for i in range(3):
        weights = [rng.normal(size=w.shape).astype("float32") for w in model.get_weights()]
        model.set_weights(weights)
        model.save_weights(run_dir.checkpoint_path(i))
        saved.append(weights)
    output = str(tmp_path / "avg" / "averaged.weights.h5")
    assert checkpoints.average_checkpoints(run_dir.checkpoints(), output) == len(saved[0])
    assert sorted(os.listdir(tmp_path / "avg")) == ["averaged.weights.h5"]  # no temporary file left
    model.load_weights(output)
    for got, *versions in zip(model.get_weights(), *saved):
        np.testing.assert_array_equal(got, np.mean(np.asarray(versions, np.float64), axis=0).astype(np.float32))


def test_keep_last_checkpoints_prunes_older_files(tmp_path):
    model = tiny_model()
    run_dir = RunDir(tmp_path)
    callback = checkpoints.KeepLastCheckpoints(run_dir, keep=2)
    callback.set_model(model)
    for epoch in range(5):
        callback.on_epoch_end(epoch, {})
    names = [os.path.basename(p) for p in run_dir.checkpoints()]
    assert names == ["ckpt-00004.weights.h5", "ckpt-00005.weights.h5"]


def test_average_script_checks_its_arguments(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    script = os.path.join(ROOT, "scripts", "average_checkpoints.py")
    result = subprocess.run([sys.executable, script, "--model-dir", str(tmp_path), "--last", "3",
                             "--output", str(tmp_path / "a.weights.h5")], capture_output=True, text=True)
    assert result.returncode == 1 and "asked for the last 3 checkpoints but" in result.stderr
    result = subprocess.run([sys.executable, script, "--model-dir", str(tmp_path), "--last", "0",
                             "--output", str(tmp_path / "a.weights.h5")], capture_output=True, text=True)
    assert result.returncode == 2 and "--last must be at least 1; got 0" in result.stderr


def test_missing_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.weights.h5"):
        checkpoints.average_checkpoints([str(tmp_path / "nope.weights.h5")], str(tmp_path / "o.weights.h5"))
