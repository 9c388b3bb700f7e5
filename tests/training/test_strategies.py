"""train.py under tf.distribute strategies, as the training page's commands run it: MirroredStrategy
over two logical CPUs for the paper's WMT recipe, and two workers on 127.0.0.1 for multi-worker."""

import json
import os
import re
import subprocess

import numpy as np
import pytest

from keras_transformer.decoding import restore
from keras_transformer.run_dir import RunDir
from tests.conftest import load_config, weights_by_name
from tests.helpers.docs import bash, checkout_environment, docs_command, free_port, make_checkout

TINY_SCALE = ["--preset", "tiny", "--vocab-size", "300", "--batch-tokens", "1024", "--steps", "6",
              "--checkpoint-every", "1"]


@pytest.mark.slow
def test_wmt_recipe(tmp_path):
    """The paper's recipe as the training page gives it, on 64 mock WMT14 pairs per
    split, two CPU replicas and a tiny model: train with MirroredStrategy,
    average the last 5 checkpoints, evaluate and export with the average."""
    import tensorflow as tf
    import tensorflow_datasets as tfds

    from keras_transformer.data import sources

    checkout = make_checkout(tmp_path)
    env = {"KT_TEST_MOCK_TFDS": "64", "KT_TEST_LOGICAL_CPUS": "2",
           "KT_TEST_SCALE": json.dumps({"train.py": TINY_SCALE})}
    trained = bash(checkout, docs_command(r"--dataset wmt14_translate/de-en (?!.*--jit-compile).*--strategy mirrored"),
                   **env)
    assert "Strategy: mirrored, 2 replica(s) in sync" in trained.stdout
    run = checkout / "runs" / "wmt14-base"
    kept = RunDir(run).checkpoints()
    assert [os.path.basename(p) for p in kept] == [f"ckpt-0000{i}.weights.h5" for i in range(2, 7)]
    paper = load_config(str(run))  # the paper's schedule: warm-up 4000, inverse square root to the end
    assert (paper.warmup_steps, paper.cooldown, paper.learning_rate_scale, paper.label_smoothing) == (
        4000, 0.0, 1.0, 0.1)

    bash(checkout, docs_command(r"^python scripts/average_checkpoints\.py "), **env)
    averaged = weights_by_name(run / "averaged.weights.h5")
    last_five = [weights_by_name(p) for p in kept]
    assert len(averaged) > 10
    for name, value in averaged.items():
        np.testing.assert_allclose(value, np.mean([w[name] for w in last_five], axis=0), rtol=1e-5, atol=1e-6,
                                   err_msg=name)

    evaluated = bash(checkout, docs_command(r"^python scripts/evaluate\.py --model-dir runs/wmt14-base "), **env)
    assert re.search(r"^sacreBLEU \d+\.\d+  \(nrefs:1\|", evaluated.stdout, re.M)
    exported = bash(checkout, docs_command(r"^python scripts/export\.py --model-dir runs/wmt14-base "), **env)
    assert sorted(os.listdir(checkout / "saved_models" / "wmt14-base")) == ["1", "2"]  # train.py exported 1
    assert "saved_models/wmt14-base/2" in exported.stdout

    # Both used the averaged weights: the same translations as a model restored with them here.
    config, model, tokenizer = restore.restore(str(run), str(run / "averaged.weights.h5"))
    translator = restore.make_translator(config.decoding, model, tokenizer)
    with tfds.testing.mock_data(num_examples=64):
        sentences, _ = sources.read_split(config.data, "test")
    expected = translator.translate(sentences, progress=False).best
    hypotheses = (run / "test.hypotheses.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert hypotheses == expected
    served = tf.saved_model.load(str(checkout / "saved_models" / "wmt14-base" / "2"))
    out = served.signatures["serving_default"](sentences=tf.constant(sentences[:8]))
    assert [t.decode("utf-8") for t in out["translations"].numpy()] == expected[:8]


@pytest.mark.slow
def test_multi_worker_command(tmp_path):
    """The training page's TF_CONFIG command, started twice (worker 0 and worker 1) on
    127.0.0.1 with /shared/ moved into tmp_path: both finish with identical
    weights, and only the chief evaluates."""
    from tests.training.test_trainer import optimizer_iterations

    checkout = make_checkout(tmp_path)
    command = docs_command(r"^TF_CONFIG=")
    hosts = re.findall(r'"(host\d:\d+)"', command)
    assert len(hosts) == 2 and '"index": 0' in command
    ports = [free_port(), free_port()]
    for host, port in zip(hosts, ports):
        command = command.replace(host, f"127.0.0.1:{port}")
    command = command.replace("/shared/", f"{tmp_path}/shared/")
    environment = checkout_environment(checkout, KT_TEST_MOCK_TFDS="64", KT_TEST_SCALE=json.dumps(
        {"train.py": TINY_SCALE[:-4] + ["--steps", "6", "--checkpoint-every", "3"]}))
    workers = [subprocess.Popen(["bash", "-c", command.replace('"index": 0', f'"index": {index}')], cwd=checkout,
                                env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for index in range(2)]
    outputs = [w.communicate(timeout=900)[0] for w in workers]
    assert [w.returncode for w in workers] == [0, 0], outputs[0][-2000:] + outputs[1][-2000:]
    model_dir = re.search(r"--model-dir (\S+)", command).group(1)
    chief = os.path.join(model_dir, "checkpoints", "ckpt-00002.weights.h5")
    other = os.path.join(model_dir, "workers", "1", "checkpoints", "ckpt-00002.weights.h5")
    assert optimizer_iterations(chief) == optimizer_iterations(other) == 6
    a, b = weights_by_name(chief), weights_by_name(other)
    assert len(a) > 10 and a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    assert "Strategy: multi_worker, 2 replica(s) in sync" in outputs[0]
    assert "sacreBLEU" in outputs[0] and "sacreBLEU" not in outputs[1]
