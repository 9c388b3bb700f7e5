import shutil

import h5py
import numpy as np
import pytest

from keras_transformer.cli import train_main
from keras_transformer.config import RunConfig
from keras_transformer.run_dir import RunDir
from keras_transformer.training import fine_tuning, recipe
from tests.conftest import run_entry_point, weights_by_name, write_tsv
from tests.helpers.docs import docs_block


def test_a_fine_tuning_run_starts_from_the_runs_weights_and_vocabulary_with_a_fresh_optimizer(
        trained_tiny_run, small_corpus, tmp_path):
    _, test = small_corpus
    config = RunConfig(dataset=write_tsv(tmp_path / "domain.tsv", test[40:200]), init_from=trained_tiny_run,
                       preset="tiny", vocab_size=500, max_length=32, steps=2, checkpoint_every=2,
                       batch_tokens=1024, warmup_steps=4000, learning_rate_scale=1e-6, precision="float32",
                       bleu_sentences=0, model_dir=str(tmp_path / "tuned"), export_dir="")
    recipe.train(config, verbose=0)
    source_run, tuned_run = RunDir(trained_tiny_run), RunDir(tmp_path / "tuned")
    with open(source_run.vocabulary_path, "rb") as a, open(tuned_run.vocabulary_path, "rb") as b:
        assert a.read() == b.read()
    tuned_path = tuned_run.checkpoints()[-1]
    with h5py.File(tuned_path, "r") as f:
        assert int(f["optimizer/vars/0"][()]) == 2  # the optimizer counted only the new run's updates
    source, tuned = weights_by_name(source_run.default_weights()), weights_by_name(tuned_path)
    assert source.keys() == tuned.keys()
    # Two updates at a learning rate of ~1e-11 move no weight measurably.
    assert max(np.abs(source[k] - tuned[k]).max() for k in source) < 1e-6
    assert max(np.abs(source[k]).max() for k in source) > 0.1  # and the weights are not trivially equal


def test_preset_and_vocabulary_come_from_the_run_and_contradicting_flags_are_named(trained_tiny_run, tmp_path,
                                                                                   capsys):
    values = fine_tuning.inherit({"preset": "small", "vocab_size": 1000, "steps": 5}, trained_tiny_run, given=set())
    assert values == {"preset": "tiny", "norm_first": None, "vocab_size": 500, "encoder_layers": None,
                      "decoder_layers": None, "steps": 5}
    # Depths: the tiny preset's 2 layers given as a flag are the run's unset depth; 1 contradicts it.
    assert fine_tuning.inherit({"decoder_layers": 2}, trained_tiny_run, given={"decoder_layers"})[
        "decoder_layers"] is None
    with pytest.raises(ValueError, match=r"--decoder-layers 1 \(the run has None\)"):
        fine_tuning.inherit({"decoder_layers": 1}, trained_tiny_run, given={"decoder_layers"})
    pre_norm = RunDir(tmp_path / "pre_norm")  # a run with pre-norm blocks: its weights include two final norms
    pre_norm.save_config(RunConfig(**{**RunDir(trained_tiny_run).load_config().to_dict(), "norm_first": True}))
    assert fine_tuning.inherit({"norm_first": None}, str(tmp_path / "pre_norm"), given=set())["norm_first"] is True
    with pytest.raises(ValueError, match=r"--norm-first False \(the run has True\)"):
        fine_tuning.inherit({"norm_first": False}, str(tmp_path / "pre_norm"), given={"norm_first"})
    # The tiny run recorded no placement (None: its preset's post-norm), which --no-norm-first repeats.
    assert fine_tuning.inherit({"norm_first": False}, trained_tiny_run, given={"norm_first"})["norm_first"] is None
    with pytest.raises(ValueError, match=r"--norm-first True \(the run has None\)"):
        fine_tuning.inherit({"norm_first": True}, trained_tiny_run, given={"norm_first"})
    code, _, err = run_entry_point(train_main, ["--init-from", trained_tiny_run, "--preset", "base",
                                                "--vocab-size", "500", "--model-dir", str(tmp_path / "x")], capsys)
    assert code == 2
    assert "--preset 'base' (the run has 'tiny')" in err and "--vocab-size" not in err.split("contradict it")[1]
    code, _, err = run_entry_point(train_main, ["--init-from", str(tmp_path / "nowhere")], capsys)
    assert code == 2 and "nowhere" in err and "not a directory" in err
    with pytest.raises(ValueError, match="same folder"):
        fine_tuning.check_compatible(trained_tiny_run, trained_tiny_run,
                                     {"preset": "tiny", "norm_first": None, "vocab_size": 500,
                                      "encoder_layers": None, "decoder_layers": None})


@pytest.mark.slow
def test_fine_tuning_block(tiny_run_dir, tmp_path, monkeypatch, capsys):
    """The training page's block, in a checkout after the main job: the run
    restored, 40 updates on the block's own pairs lower their loss below the
    run's, its batches are shifted by one, the translator prints what the
    block's beam search finds, and the weights it saves reload to the same model."""
    import tensorflow as tf

    import keras_transformer as kt
    from keras_transformer.data.tokenizer import BOS_ID, EOS_ID
    from keras_transformer.decoding import restore

    shutil.copytree(tiny_run_dir, tmp_path / "runs" / "numerals_en_de-small")  # the main job's run, here tiny
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(docs_block("decoding.greedy_search"), namespace)  # noqa: S102
    model, tokenizer = namespace["model"], namespace["tokenizer"]
    assert int(model.optimizer.iterations) == 40
    (source, target_in), target_out = next(iter(namespace["batches"]))
    assert source.dtype == target_in.dtype == target_out.dtype == tf.int32
    # The decoder input is BOS + target and the output target + EOS: shifted by one.
    assert np.all(np.asarray(target_in[:, 0]) == BOS_ID)
    shifted = np.asarray(target_out[:, :-1])
    np.testing.assert_array_equal(np.where(shifted == EOS_ID, 0, shifted), target_in[:, 1:])

    loss = kt.LabelSmoothedCrossEntropy(label_smoothing=0.1)
    _, before, _ = restore.restore(str(tmp_path / "runs" / "numerals_en_de-small"))
    tuned_loss = float(loss(target_out, model((source, target_in), training=False)))
    run_loss = float(loss(target_out, before((source, target_in), training=False)))
    assert tuned_loss < 0.8 * run_loss, (tuned_loss, run_loss)

    ids, scores = namespace["ids"], namespace["scores"]  # the beam search's (it reassigns `ids`)
    source_length = namespace["source_ids"].shape[1]
    assert ids.shape[:2] == (1, 1) and ids.shape[2] <= source_length + 50 and ids.dtype == tf.int32
    assert scores.shape == (1, 1) and np.all(np.asarray(scores) <= 0)
    beam_text = tokenizer.detokenize(ids[:, 0]).numpy()[0].decode("utf-8")
    assert capsys.readouterr().out.splitlines()[-1] == str([beam_text])  # the run's decoding: beam 4, alpha 0.6

    _, reloaded, _ = restore.restore(str(tmp_path / "runs" / "numerals_en_de-small"),
                                     weights=str(tmp_path / "fine_tuned.weights.h5"))
    np.testing.assert_allclose(reloaded((source, target_in), training=False),
                               model((source, target_in), training=False), rtol=1e-5, atol=1e-5)
