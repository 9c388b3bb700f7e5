"""The eole comparison's parts that need no eole: its config, its clock and its checks.
The whole comparison, eole included, is tests/test_docs.py's test_eole_peer_command."""

import json
import os
import sys
import time

import pytest

from keras_transformer.benchmarks import eole_peer
from keras_transformer.config import RunConfig
from keras_transformer.modeling import presets
from tests.conftest import run_entry_point, write_tsv


# eole's WMT17 English-German recipe (eole-nlp/eole, recipes/wmt17/wmt17_ende_spm.yaml), as its file
# states them: what the peer takes from eole's side.
EOLE_WMT17 = {"optim": "adamw", "learning_rate": 2, "decay_method": "noam", "adam_beta2": 0.998,
              "dropout": [0.1], "attention_dropout": [0.1], "label_smoothing": 0.1,
              "param_init_method": "xavier_uniform"}


@pytest.mark.parametrize("preset", ["tiny", "small", "base"])
def test_the_eole_config_has_this_runs_size_vocabulary_batch_and_warmup_and_the_recipes_rest(preset):
    """Our side's settings come from the run (its preset's sizes, its batch,
    warm-up, length cut, seed and SentencePiece model), the rest from eole's
    recipe; on a CPU, in float32."""
    size = presets.get_preset(preset)
    config = RunConfig(dataset="train.tsv", preset=preset, vocab_size=8000, batch_tokens=2048, max_length=112,
                       warmup_steps=338, seed=3)
    settings = eole_peer.eole_config(config, "/r/sentencepiece.model", "/w/train.src", "/w/train.tgt",
                                     "/w/vocab.shared", "/w/model")
    assert json.loads(json.dumps(settings)) == settings  # written as JSON, which YAML reads
    model = settings["model"]
    assert (model["hidden_size"], model["layers"], model["heads"], model["transformer_ff"]) == \
        (size.d_model, size.num_layers, size.num_heads, size.d_ff)
    assert model["embeddings"]["word_vec_size"] == size.d_model
    assert model["share_decoder_embeddings"] is model["share_embeddings"] is True  # tied, as ours
    training = settings["training"]
    assert (training["batch_size"], training["batch_type"], training["warmup_steps"]) == \
        (config.batch_tokens, "tokens", config.warmup_steps)
    assert {name: training[name] for name in EOLE_WMT17} == EOLE_WMT17
    assert (training["gpu_ranks"], training["compute_dtype"], training["save_checkpoint_steps"]) == \
        ([], "fp32", eole_peer.SAVE_EVERY)
    assert settings["transforms_configs"]["sentencepiece"] == {"src_subword_model": "/r/sentencepiece.model",
                                                               "tgt_subword_model": "/r/sentencepiece.model"}
    assert settings["transforms_configs"]["filtertoolong"] == {"src_seq_length": config.max_length,
                                                               "tgt_seq_length": config.max_length}
    assert settings["src_vocab"] == settings["tgt_vocab"] == "/w/vocab.shared" and settings["share_vocab"]
    assert settings["data"] == {"corpus_1": {"path_src": "/w/train.src", "path_tgt": "/w/train.tgt"}}
    assert settings["seed"] == config.seed
    matched = eole_peer.eole_config(config, "/r/sentencepiece.model", "/w/train.src", "/w/train.tgt",
                                    "/w/vocab.shared", "/w/model", learning_rate=0.524)
    assert matched["training"] == {**training, "learning_rate": 0.524}


def test_run_until_stops_a_command_at_its_deadline_and_lets_a_quick_one_end(tmp_path):
    log = str(tmp_path / "log")
    start = time.monotonic()
    code, stopped = eole_peer.run_until([sys.executable, "-c", "import time; print('up', flush=True); "
                                         "time.sleep(60)"], start + 2.0, log)
    assert stopped and code != 0 and 2.0 <= time.monotonic() - start < 20
    code, stopped = eole_peer.run_until([sys.executable, "-c", "import sys; print('done'); sys.exit(3)"],
                                        time.monotonic() + 60, log)
    assert (code, stopped) == (3, False)
    assert open(log, encoding="utf-8").read().split() == ["up", "done"]  # one log, appended


def test_run_until_reports_the_time_left_while_the_command_runs(tmp_path):
    left = []
    deadline = time.monotonic() + 30
    code, stopped = eole_peer.run_until([sys.executable, "-c", "import time; time.sleep(3)"], deadline,
                                        str(tmp_path / "log"), report=left.append, every=0.5)
    assert (code, stopped) == (0, False)
    assert len(left) >= 2 and left == sorted(left, reverse=True) and all(20 < s < 30 for s in left)


def test_the_last_complete_checkpoint_is_used(tmp_path):
    model = tmp_path / "model"
    with pytest.raises(ValueError, match="no checkpoint in .*model.*train.log"):
        eole_peer.last_checkpoint(str(model))
    for step, complete in ((20, True), (100, True), (120, False), (40, True)):
        os.makedirs(model / f"step_{step}")
        if complete:
            (model / f"step_{step}" / "config.json").write_text("{}")
    (model / "step_x").mkdir()
    assert eole_peer.last_checkpoint(str(model)) == (str(model / "step_100"), 100)


def test_the_lines_given_to_eole_are_one_per_sentence(tmp_path):
    path = str(tmp_path / "a.txt")
    eole_peer.write_lines(path, ["ein Satz", "zwei\nZeilen", ""])
    assert eole_peer.read_lines(path) == ["ein Satz", "zwei Zeilen", ""]


def test_the_peer_flags_are_checked(capsys, tmp_path):
    from keras_transformer import cli

    train = write_tsv(tmp_path / "train.tsv", [("a", "b")])
    eole = tmp_path / "eole"
    eole.write_text("#!/bin/sh\n")
    eole.chmod(0o755)
    cases = [
        (["--peer-eole", str(eole), "--test", train], "--peer-eole needs --dataset."),
        (["--peer-eole", str(eole), "--dataset", train, "--test", str(tmp_path / "no.tsv")],
         f"--test {str(tmp_path / 'no.tsv')!r} does not exist."),
        (["--peer-eole", str(tmp_path / "no-eole"), "--dataset", train, "--test", train],
         "is not an executable eole command; install it with"),
        (["--peer-eole", str(eole), "--dataset", train, "--test", train, "--time-budget", "0"],
         "--time-budget '0' must be positive."),
        (["--peer-eole", str(eole), "--dataset", train, "--test", train, "--peer-dir", str(tmp_path)],
         "already holds a run"),
        (["--peer-eole", str(eole), "--dataset", train, "--test", train, "--eole-learning-rate", "fast"],
         "--eole-learning-rate 'fast' must be a positive number or `match`."),
    ]
    for argv, message in cases:
        code, _, err = run_entry_point(cli.benchmark_main, argv, capsys)
        assert code == 2 and message in err, (argv, err)
