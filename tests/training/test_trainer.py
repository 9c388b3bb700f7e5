import json
import os
import signal
import subprocess
import sys
import time
import warnings

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_transformer as kt
from keras_transformer.config import RunConfig
from keras_transformer.run_dir import RunDir
from keras_transformer.training import bleu_validation, recipe, trainer
from tests.conftest import ROOT, build_model, write_tsv
from tests.helpers.weights import weights_by_path

TRAIN_SCRIPT = os.path.join(ROOT, "scripts", "train.py")


def micro_batch(rng, rows, src_len, tgt_len, tokens_per_row):
    """A batch in which every row has exactly `tokens_per_row` real target tokens."""
    source = rng.integers(4, 29, size=(rows, src_len)).astype("int32")
    target = rng.integers(4, 29, size=(rows, tgt_len + 1)).astype("int32")
    target[:, tokens_per_row + 1:] = 0
    source[:, rng.integers(2, src_len):] = 0
    return (source, target[:, :-1]), target[:, 1:]


def pad_concat(a, b):
    """Concatenates two batches along rows, padding to the longer length."""
    def join(x, y):
        width = max(x.shape[1], y.shape[1])
        pad = lambda z: np.pad(z, ((0, 0), (0, width - z.shape[1])))  # noqa: E731
        return np.concatenate([pad(x), pad(y)])
    (sa, ta), oa = a
    (sb, tb), ob = b
    return (join(sa, sb), join(ta, tb)), join(oa, ob)


def initial_model():
    keras.utils.set_random_seed(0)
    model = kt.Transformer.from_preset("tiny", vocab_size=29, dropout=0.0)
    model.build()
    return model


def run_updates(batches, grad_accum):
    model = initial_model()
    config = RunConfig(preset="tiny", grad_accum=grad_accum, warmup_steps=10)
    trainer.compile_model(model, config.training)
    dataset = tf.data.Dataset.from_generator(
        lambda: iter(batches),
        output_signature=((tf.TensorSpec([None, None], tf.int32),) * 2, tf.TensorSpec([None, None], tf.int32)),
    )
    # Keras 3.15 counts one extra optimizer iteration per epoch on datasets of
    # unknown cardinality (weights are unaffected), so declare it.
    dataset = dataset.apply(tf.data.experimental.assert_cardinality(len(batches)))
    model.fit(dataset, epochs=1, verbose=0)
    return model, weights_by_path(model)


@pytest.mark.slow
def test_gradient_accumulation_equals_one_step_on_the_concatenation():
    rng = np.random.default_rng(1)
    # Four micro-batches of different shapes and padding, each with 12 real target tokens.
    micro = [micro_batch(rng, 2, 7, 9, 6), micro_batch(rng, 3, 5, 4, 4),
             micro_batch(rng, 4, 9, 6, 3), micro_batch(rng, 1, 11, 12, 12)]
    accumulated, weights_a = run_updates(micro, grad_accum=2)
    concatenated, weights_b = run_updates([pad_concat(micro[0], micro[1]), pad_concat(micro[2], micro[3])], 1)
    assert int(accumulated.optimizer.iterations) == int(concatenated.optimizer.iterations) == 2
    initial = weights_by_path(initial_model())
    assert sum(np.abs(weights_b[n] - initial[n]).sum() for n in initial) > 1e-2
    compared = 0
    for name in weights_b:
        if name.endswith("key/bias"):
            # Its true gradient is 0 (softmax ignores a per-query constant); Adam
            # scales the float rounding noise up to learning-rate-sized steps.
            continue
        # Updates are ~5e-3 per step; a wrong schedule or normalisation moves every
        # element by ~1e-2, while Adam amplifies rounding in near-zero gradients to ~1e-5.
        np.testing.assert_allclose(weights_a[name], weights_b[name], rtol=0, atol=1e-4, err_msg=name)
        compared += 1
    assert compared > 30


@pytest.mark.slow
def test_unknown_choices_exit_2_and_list_the_valid_ones():
    result = subprocess.run([sys.executable, TRAIN_SCRIPT, "--precision", "float8"], capture_output=True, text=True)
    assert result.returncode == 2
    assert "invalid choice: 'float8' (choose from 'auto', 'float32', 'mixed_bfloat16', 'mixed_float16')" in result.stderr
    result = subprocess.run([sys.executable, TRAIN_SCRIPT, "--steps", "10", "--checkpoint-every", "3"],
                            capture_output=True, text=True)
    assert result.returncode == 1 and "steps must be a multiple of checkpoint_every" in result.stderr


def test_help_explains_every_flag():
    result = subprocess.run([sys.executable, TRAIN_SCRIPT, "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    for field in RunConfig.__dataclass_fields__.values():
        flag = "--" + field.name.replace("_", "-")
        assert flag in result.stdout
        assert field.metadata["help"].split()[0] in result.stdout, flag


def train_command(tsv, model_dir, steps, every, extra=()):
    return [sys.executable, TRAIN_SCRIPT, "--dataset", tsv, "--preset", "tiny", "--vocab-size", "400",
            "--max-length", "32", "--batch-tokens", "256", "--steps", str(steps), "--checkpoint-every", str(every),
            "--warmup-steps", "20", "--model-dir", model_dir, "--export-dir", "", "--keep-checkpoints", "100",
            "--beam-size", "1", *extra]


def optimizer_iterations(path):
    with h5py.File(path, "r") as f:
        return int(np.asarray(f["optimizer/vars/0"]))


def backup_epoch(path):
    """The epoch in Keras' backup metadata, or None while the file is absent or half written (the
    run writes it in place while the test polls it)."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)["epoch"]
    except (FileNotFoundError, json.JSONDecodeError):
        return None


@pytest.mark.slow
def test_a_killed_run_resumes_from_its_backup_and_finishes_at_the_requested_step(small_corpus, tmp_path):
    train, _ = small_corpus
    tsv = write_tsv(tmp_path / "corpus.tsv", train[:600])
    model_dir = str(tmp_path / "run")
    command = train_command(tsv, model_dir, steps=600, every=50)
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    metadata = os.path.join(model_dir, "backup", "training_metadata.json")
    deadline = time.time() + 300
    while time.time() < deadline:
        if (backup_epoch(metadata) or 0) >= 2:
            break
        assert first.poll() is None, "the run finished before it could be killed"
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait()
    backed_up_epoch = json.load(open(metadata))["epoch"]
    assert 2 <= backed_up_epoch < 12
    run_dir = RunDir(model_dir)
    before = {p: os.path.getmtime(p) for p in run_dir.checkpoints()[:backed_up_epoch]}

    second = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    epochs = [line for line in second.stdout.splitlines() if line.startswith("Epoch ")]
    assert epochs[0] == f"Epoch {backed_up_epoch + 1}/12", epochs[:2]
    found = run_dir.checkpoints()
    assert os.path.basename(found[-1]) == "ckpt-00012.weights.h5"
    assert optimizer_iterations(found[-1]) == 600
    # The resumed run continued the optimizer state, and did not redo earlier epochs.
    assert optimizer_iterations(found[backed_up_epoch]) == 50 * (backed_up_epoch + 1)
    assert {p: os.path.getmtime(p) for p in before} == before
    assert "sacreBLEU" in second.stdout
    # Validation BLEU: every interval scored once, and the best checkpoint and
    # the patience counter are what an uninterrupted run with these scores has.
    state = bleu_validation.read_state(run_dir)
    assert sorted(state["scores"]) == list(range(12))
    bleu = [state["scores"][e]["val_bleu"] for e in range(12)]
    best = bleu.index(max(bleu))
    assert state["best_epoch"] == best and bleu_validation.progress(state["scores"]) == (best, 11 - best)
    with h5py.File(run_dir.best_weights_path, "r") as b, h5py.File(found[best], "r") as c:
        names = []
        c.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset)
                     and not name.startswith("optimizer/") else None)
        assert names and all(np.array_equal(b[name][()], c[name][()]) for name in names)
    seconds = [state["scores"][e]["seconds"] for e in range(12)]
    assert seconds == sorted(seconds)  # the resumed run continued the clock


@pytest.mark.slow
def test_a_run_raises_none_of_the_warnings_keras_gives_about_tf_data_inputs(small_corpus, tmp_path, monkeypatch):
    """Keras warns that `shuffle=True` is ignored on a tf.data input, and that
    "your input ran out of data; interrupting training" when its first pass
    over the validation batches learns their number. Neither asks anything of
    the user (the pipeline shuffles, and nothing is interrupted), so a run says neither."""
    train, _ = small_corpus
    config = RunConfig(dataset=write_tsv(tmp_path / "corpus.tsv", train[:400]), preset="tiny", vocab_size=500,
                       max_length=32, steps=4, checkpoint_every=2, batch_tokens=512, precision="float32",
                       bleu_sentences=0, model_dir=str(tmp_path / "run"), export_dir="")
    evaluations = []
    evaluate = kt.Transformer.evaluate

    def counted(self, *args, **kwargs):  # fit's validation pass after each interval
        evaluations.append(evaluate(self, *args, **kwargs))
        return evaluations[-1]

    monkeypatch.setattr(kt.Transformer, "evaluate", counted)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        recipe.train(config, verbose=0)
    said = [str(w.message) for w in caught]
    assert not [m for m in said if "ran out of data" in m or "shuffle=True" in m], said
    assert len(evaluations) == 2  # both intervals' validation passes ran


@pytest.mark.parametrize("cooldown,grad_accum", [(0.4, 1), (0.4, 2), (0.0, 1)])
def test_the_learning_rate_cools_down_to_zero_over_the_last_updates(cooldown, grad_accum):
    config = RunConfig(preset="tiny", precision="float32", steps=10, checkpoint_every=10, warmup_steps=4,
                       cooldown=cooldown, grad_accum=grad_accum)
    optimizer = trainer.compile_model(build_model(config, 29), config.training).optimizer
    paper = kt.TransformerSchedule(d_model=32, warmup_steps=4)
    for update in range(12):
        # The counter Keras calls the schedule with; it counts micro-batches under accumulation.
        optimizer._iterations.assign(update * grad_accum)
        factor = min(1.0, (10 - update) / 4) if cooldown else 1.0  # the last 0.4 * 10 updates
        assert float(optimizer.learning_rate) == pytest.approx(max(factor, 0.0) * float(paper(update)),
                                                               rel=1e-6, abs=1e-12), update


def test_dropout_is_the_presets_unless_the_run_sets_it():
    def rates(model):
        return {layer.rate for layer in model._flatten_layers() if isinstance(layer, keras.layers.Dropout)}

    preset = kt.presets.get_preset("tiny")
    assert preset.dropout > 0 and preset.attention_dropout == preset.activation_dropout == 0.0
    assert rates(build_model(RunConfig(preset="tiny", precision="float32"), 29)) == {preset.dropout, 0.0}
    assert rates(build_model(RunConfig(preset="tiny", precision="float32", dropout=0.25), 29)) == {0.25, 0.0}


@pytest.mark.slow
def test_mixed_float16_gets_dynamic_loss_scaling_and_trains():
    config = RunConfig(preset="tiny", precision="mixed_float16", warmup_steps=10)
    model = trainer.compile_model(build_model(config, 29), config.training)
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert keras.config.dtype_policy().name == "float32"  # no global side effect
    batch = micro_batch(np.random.default_rng(0), 4, 6, 6, 5)
    before = [np.asarray(w) for w in model.trainable_weights]
    loss = model.train_on_batch(*batch)
    assert np.isfinite(loss)
    assert any(np.abs(np.asarray(w) - b).max() > 0 for w, b in zip(model.trainable_weights, before))
