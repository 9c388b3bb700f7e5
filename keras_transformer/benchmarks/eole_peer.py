"""This package against eole, OpenNMT's PyTorch toolkit, at the same wall-clock budget on the same split.

`compare(dataset, test, minutes, eole, work_dir)` runs, one after the other
on the same machine:

1. this package: `scripts/train.py --dataset D --test T --time-budget M`
   with no other flag (the recipe chooses; `recipe.train_and_evaluate`),
   which trains, chooses its model and scores the test split;
2. eole, in its own environment (the `eole` command of a virtual
   environment holding torch; this package never imports torch), on the same
   training pairs (the training split of the run above: its validation pairs
   left out), with the same SentencePiece model, model size, tokens per
   batch and warm-up (the recipe's 4,000 updates are more than a CPU budget
   buys), and pre-norm blocks (eole's default layer style, and the
   recipe's choice at such a budget). Its other settings are those of eole's documented WMT17
   English-German recipe (`EOLE_RECIPE`): AdamW with beta2 0.998 and the
   "noam" schedule at learning rate 2, dropout and attention dropout 0.1,
   label smoothing 0.1, Xavier-uniform initialisation, shared and tied
   embeddings. `learning_rate="match"` gives eole this run's
   `learning_rate_scale` instead, so that its warm-up climbs as this
   package's does. eole has no time budget: `eole build_vocab` and
   `eole train` get the same minutes, train is stopped when they are spent,
   and its last checkpoint (written every `SAVE_EVERY` updates) translates
   the test split with the paper's beam search (`--beam_size` and
   `--length_penalty wu --alpha` from `config.PAPER_BEAM_SIZE` and `PAPER_ALPHA`).

Both sides are then scored with the same sacreBLEU and chrF
(`decoding.evaluation.score`) against the same references.
"""

import dataclasses
import glob
import json
import os
import re
import signal
import subprocess
import time

from keras_transformer.config import PAPER_ALPHA, PAPER_BEAM_SIZE, RunConfig, parse_minutes
from keras_transformer.data import sources
from keras_transformer.decoding import evaluation
from keras_transformer.modeling import presets
from keras_transformer.run_dir import RunDir

EOLE_RECIPE = "eole-nlp/eole recipes/wmt17/wmt17_ende_spm.yaml"
# That recipe's learning rate: the factor of eole's "noam" schedule, factor * d_model^-0.5 * min(step^-0.5,
# step * warmup^-1.5), which is the paper's schedule times 2.
EOLE_LEARNING_RATE = 2.0
# eole writes a checkpoint every this many updates; a stop loses at most these.
SAVE_EVERY = 20


@dataclasses.dataclass(frozen=True)
class PeerResult:
    """One side of the comparison: its test scores and what it made of the budget."""

    name: str
    scores: dict
    updates: int
    train_seconds: float


def eole_config(config, spm_model, train_src, train_tgt, vocab_path, model_path, learning_rate=EOLE_LEARNING_RATE):
    """eole's training config (a dict; JSON is YAML) for the run `config` of this
    package: its preset's size, vocabulary model, batch tokens, length cut and
    warm-up; the rest from `EOLE_RECIPE`."""
    size = presets.get_preset(config.preset)
    return {
        "save_data": os.path.join(os.path.dirname(model_path), "samples"),
        "overwrite": True,
        "seed": config.seed,
        "report_every": 10,
        "src_vocab": vocab_path, "tgt_vocab": vocab_path, "share_vocab": True,
        "src_vocab_size": config.vocab_size, "tgt_vocab_size": config.vocab_size, "vocab_size_multiple": 8,
        "data": {"corpus_1": {"path_src": train_src, "path_tgt": train_tgt}},
        "transforms": ["sentencepiece", "filtertoolong"],
        "transforms_configs": {
            "sentencepiece": {"src_subword_model": spm_model, "tgt_subword_model": spm_model},
            "filtertoolong": {"src_seq_length": config.max_length, "tgt_seq_length": config.max_length}},
        "training": {
            "model_path": model_path, "keep_checkpoint": 2, "save_checkpoint_steps": SAVE_EVERY,
            "train_steps": 1_000_000,  # the budget stops it
            "world_size": 1, "gpu_ranks": [], "num_workers": 0,
            "batch_type": "tokens", "batch_size": config.batch_tokens, "batch_size_multiple": 8,
            "accum_count": [1], "accum_steps": [0], "compute_dtype": "fp32",
            "optim": "adamw", "learning_rate": learning_rate, "warmup_steps": config.warmup_steps,
            "decay_method": "noam", "adam_beta2": 0.998, "dropout_steps": [0], "dropout": [0.1],
            "attention_dropout": [0.1], "max_grad_norm": 0, "label_smoothing": 0.1, "param_init_method": "xavier_uniform",
            "normalization": "tokens"},
        "model": {
            "architecture": "transformer", "hidden_size": size.d_model, "layers": size.num_layers,
            "heads": size.num_heads, "transformer_ff": size.d_ff,
            "share_decoder_embeddings": True, "share_embeddings": True,
            "embeddings": {"word_vec_size": size.d_model, "position_encoding_type": "SinusoidalInterleaved"}},
    }


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line.replace("\n", " ") + "\n")


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def run_until(command, deadline, log_path, clock=time.monotonic, report=None, every=60.0):
    """Runs `command` (a list) with its output to `log_path` until it ends or
    `clock()` reaches `deadline`, when its process group gets SIGTERM (then
    SIGKILL after 30 s). While it runs, `report(seconds_left)`, if given, is
    called every `every` seconds. Returns (return code, whether the deadline
    stopped it)."""
    with open(log_path, "a", encoding="utf-8") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        reported = clock()
        while process.poll() is None and clock() < deadline:
            time.sleep(0.2)
            if report is not None and clock() - reported >= every:
                reported = clock()
                report(max(0.0, deadline - reported))
        if process.poll() is not None:
            return process.returncode, False
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        return process.returncode, True


def last_checkpoint(model_path):
    """(folder, updates) of the last `step_N` checkpoint eole wrote in `model_path`; ValueError if none."""
    steps = [(int(m.group(1)), path) for path in glob.glob(os.path.join(model_path, "step_*"))
             if (m := re.fullmatch(r"step_(\d+)", os.path.basename(path)))
             and os.path.exists(os.path.join(path, "config.json"))]
    if not steps:
        raise ValueError(f"eole wrote no checkpoint in {model_path!r} in the budget; see its train.log beside it.")
    updates, path = max(steps)
    return path, updates


def ours(dataset, test, minutes, model_dir):
    """This package's side: the default recipe at `minutes`. Returns (PeerResult, its RunConfig)."""
    from keras_transformer.training import recipe  # noqa: PLC0415  (the benchmark's top layer)

    config = RunConfig(dataset=dataset, test=test, time_budget=str(minutes), model_dir=model_dir, export_dir="")
    result = recipe.train_and_evaluate(config, fixed={"dataset", "test", "time_budget", "model_dir", "export_dir"})
    run_dir = RunDir(model_dir)
    budget = run_dir.read_budget()
    scores = {k: result[k] for k in ("bleu", "chrf", "exact_match", "bleu_signature", "chrf_signature")}
    return PeerResult("keras_transformer", scores, budget["made_updates"], budget["spent_seconds"]), \
        run_dir.load_config()


def eole_side(config, eole, minutes, work_dir, learning_rate=EOLE_LEARNING_RATE):
    """eole's side, on the training split and vocabulary of this package's run `config`."""
    os.makedirs(work_dir, exist_ok=True)

    def work(name):  # eole runs with absolute paths
        return os.path.abspath(os.path.join(work_dir, name))

    log = work("train.log")
    if os.path.exists(log):
        os.remove(log)
    start = time.monotonic()
    train_sources, train_targets = sources.read_split(config.data, "train")
    write_lines(work("train.src"), train_sources)
    write_lines(work("train.tgt"), train_targets)
    spm_model = os.path.abspath(RunDir(config.model_dir).vocabulary_path)
    settings = eole_config(config, spm_model, work("train.src"), work("train.tgt"), work("vocab.shared"),
                           work("model"), learning_rate)
    with open(work("config.yaml"), "w", encoding="utf-8") as f:
        json.dump(settings, f, indent=1)
    deadline = start + parse_minutes(str(minutes)) * 60.0
    print(f"eole: {len(train_sources):,} training pairs; build_vocab and train for {minutes} minutes "
          f"(log: {log})", flush=True)
    code, stopped = run_until([eole, "build_vocab", "--config", work("config.yaml"), "--n_sample", "-1"],
                              deadline, log)
    if code or stopped:
        raise ValueError(f"eole build_vocab {'ran out of the budget' if stopped else f'failed ({code})'}; "
                         f"see {log}.")

    def progress(seconds_left):  # eole's own progress goes to its log
        try:
            made = f"{last_checkpoint(work('model'))[1]} updates saved"
        except ValueError:
            made = "no checkpoint yet"
        print(f"eole: training, {made}, {seconds_left / 60.0:.1f} minutes left", flush=True)

    run_until([eole, "train", "--config", work("config.yaml")], deadline, log, report=progress)
    train_seconds = time.monotonic() - start
    checkpoint, updates = last_checkpoint(work("model"))
    sentences, references = sources.read_split(config.data, "test")
    write_lines(work("test.src"), sentences)
    print(f"eole: translating {len(sentences):,} test sentences with {checkpoint} ({updates} updates)", flush=True)
    code, _ = run_until([eole, "predict", "--model_path", checkpoint, "--src", work("test.src"),
                         "--output", work("test.hypotheses.txt"), "--beam_size", str(PAPER_BEAM_SIZE),
                         "--length_penalty", "wu", "--alpha", str(PAPER_ALPHA), "--max_length", "256",
                         "--batch_size", "32", "--batch_type", "sents", "--world_size", "1"],
                        float("inf"), log)
    if code:
        raise ValueError(f"eole predict failed ({code}); see {log}.")
    hypotheses = read_lines(work("test.hypotheses.txt"))
    scores = evaluation.score(hypotheses, references)
    return PeerResult("eole", scores, updates, train_seconds)


def compare(dataset, test, minutes, eole, work_dir, learning_rate=EOLE_LEARNING_RATE):
    """Both sides at `minutes`, in `work_dir` (this package's run in `ours`, eole's in `eole`).
    `learning_rate`: eole's, a number or "match" (this run's `learning_rate_scale`,
    so that eole's warm-up climbs as this package's does). Prints and returns
    (ours, eole) `PeerResult`s."""
    mine, config = ours(dataset, test, minutes, os.path.join(work_dir, "ours"))
    if learning_rate == "match":
        learning_rate = config.learning_rate_scale
    peer = eole_side(config, eole, minutes, os.path.join(work_dir, "eole"), float(learning_rate))
    print(f"\nSame split, {config.preset} preset size, {config.vocab_size}-piece SentencePiece model, "
          f"{config.batch_tokens} tokens per batch, {minutes} minutes each (eole: {EOLE_RECIPE}'s settings, "
          f"warm-up {config.warmup_steps}, learning rate {float(learning_rate):g}):")
    for side in (mine, peer):
        print(f"peer {side.name:<17s} test sacreBLEU {side.scores['bleu']:6.2f}  chrF {side.scores['chrf']:6.2f}  "
              f"{side.updates:5d} updates in {side.train_seconds / 60.0:5.1f} min")
    ratio = f"{mine.scores['bleu'] / peer.scores['bleu']:.2f}x" if peer.scores["bleu"] else "undefined (eole: 0)"
    print(f"peer keras_transformer / eole sacreBLEU: {ratio}  ({mine.scores['bleu_signature']})")
    return mine, peer
