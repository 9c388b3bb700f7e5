import json
import os

import pytest

from keras_transformer.config import RunConfig
from keras_transformer.run_dir import RunDir

# run_config.json as keras_transformer 0.1 wrote it (before settings were read in sections).
VERSION_0_1_RUN_CONFIG = """{
  "alpha": 0.6, "average_last": 5, "batch_tokens": 4096, "beam_size": 4, "bleu_beam_size": 1,
  "bleu_sentences": 500, "checkpoint_every": 200, "cooldown": 0.5, "data_dir": null, "dataset": "corpus.tsv",
  "dropout": null, "early_stopping": 0, "export_dir": "saved_models/corpus", "grad_accum": 1, "init_from": null,
  "jit_compile": false, "keep_checkpoints": 5, "label_smoothing": 0.1, "learning_rate_scale": 1.0,
  "max_length": 64, "max_output_extra": 50, "model_dir": "runs/corpus-tiny", "precision": "auto",
  "preset": "tiny", "seed": 0, "source_lang": null, "steps": 800, "strategy": "default", "target_lang": null,
  "test": null, "validation": null, "vocab_size": 500, "warmup_steps": 400
}"""


def test_a_run_config_written_by_version_0_1_still_loads(tmp_path):
    (tmp_path / "run_config.json").write_text(VERSION_0_1_RUN_CONFIG, encoding="utf-8")
    config = RunDir(tmp_path).load_config()
    assert config == RunConfig(dataset="corpus.tsv", preset="tiny", vocab_size=500, model_dir="runs/corpus-tiny",
                               export_dir="saved_models/corpus")
    assert (config.data.vocab_size, config.model.preset, config.decoding.max_input_length) == (500, "tiny", 64)


def test_settings_a_newer_version_wrote_are_not_dropped_silently(tmp_path):
    values = json.loads(VERSION_0_1_RUN_CONFIG)
    values.update(attention_window=128, rope=True)
    (tmp_path / "run_config.json").write_text(json.dumps(values), encoding="utf-8")
    with pytest.raises(ValueError, match=r"does not know: \['attention_window', 'rope'\].*newer version"):
        RunDir(tmp_path).load_config()
    with pytest.raises(FileNotFoundError, match="model directory written by scripts/train.py"):
        RunDir(tmp_path / "nothing").load_config()


def test_a_config_round_trips_through_its_run_folder(tmp_path):
    config = RunConfig(dataset="c.tsv", preset="tiny", precision="mixed_bfloat16", dropout=0.2,
                       model_dir=str(tmp_path))
    run_dir = RunDir(tmp_path)
    run_dir.save_config(config)
    assert run_dir.load_config() == config
    assert sorted(os.listdir(tmp_path)) == ["run_config.json"]  # nothing temporary left


def test_intervals_count_from_0_and_checkpoint_files_from_1(tmp_path):
    run_dir = RunDir(tmp_path)
    assert os.path.basename(run_dir.checkpoint_path(0)) == "ckpt-00001.weights.h5"
    for interval in (0, 8, 9, 99):
        assert run_dir.checkpoint_interval(run_dir.checkpoint_path(interval)) == interval
    assert run_dir.checkpoint_interval(run_dir.best_weights_path) is None


def test_checkpoints_are_listed_by_number_not_name(tmp_path):
    run_dir = RunDir(tmp_path)
    os.makedirs(run_dir.checkpoint_dir)
    for interval in (9, 8, 99):
        open(run_dir.checkpoint_path(interval), "wb").close()
    for other in (run_dir.best_weights_path, run_dir.average_weights_path):
        open(other, "wb").close()
    assert [os.path.basename(p) for p in run_dir.checkpoints()] == [
        "ckpt-00009.weights.h5", "ckpt-00010.weights.h5", "ckpt-00100.weights.h5"]


def test_the_chosen_model_is_recorded_relative_to_the_run_folder(tmp_path):
    run_dir = RunDir(tmp_path / "run")
    os.makedirs(run_dir.checkpoint_dir)
    for interval in range(3):
        open(run_dir.checkpoint_path(interval), "wb").close()
    assert run_dir.default_weights() == run_dir.checkpoint_path(2)  # no choice yet: the newest
    open(run_dir.average_weights_path, "wb").close()
    run_dir.write_choice({"chosen": "average", "path": run_dir.average_weights_path, "scores": {}})
    assert json.loads(open(run_dir.choice_path).read())["path"] == os.path.join("checkpoints", "average.weights.h5")
    # The folder can move: the choice follows it.
    os.rename(tmp_path / "run", tmp_path / "moved")
    moved = RunDir(tmp_path / "moved")
    assert moved.default_weights() == moved.average_weights_path
    os.remove(moved.average_weights_path)  # a choice whose file is gone falls back to the newest
    assert moved.default_weights() == moved.checkpoint_path(2)


def test_other_workers_write_into_their_own_folders(tmp_path):
    run_dir = RunDir(tmp_path)
    assert run_dir.worker(3).checkpoint_dir == os.path.join(str(tmp_path), "workers", "3", "checkpoints")
