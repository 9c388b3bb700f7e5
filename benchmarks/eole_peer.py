"""This package against eole, OpenNMT's PyTorch toolkit, at its best, at the same wall-clock budget on the same split.

`compare(dataset, test, minutes, eole, work_dir)` runs, one after the other
on the same machine (step 1 left out when it is given a finished run of
this package, `finished_run`):

1. this package: `scripts/train.py --dataset D --test T --time-budget M`
   with no other flag (the recipe chooses; `recipe.train_and_evaluate`),
   which trains, chooses its model and scores the test split;
2. eole, in its own environment (the `eole` command of a virtual
   environment holding torch; this package never imports torch), given
   what this package's run got:
   - the same training pairs (the run's training split), SentencePiece
     model, model size, length cut and warm-up; pre-norm blocks (eole's
     default layer style, and the recipe's choice at such a budget); its
     dropout and attention dropout (the recipe chooses dropout from the
     epochs the budget buys, a rule about the corpus, not the toolkit);
   - the same precision where eole has it: bfloat16 when this run trained in
     mixed_bfloat16 (`compute_dtype: bf16`, torch's autocast on the CPU),
     float32 if eole's bfloat16 fails on this machine (then said);
   - the same target tokens per update: eole counts a batch as its pairs
     times its longest side (`batch_type: tokens`), this package on
     buckets, so eole's `batch_size` is scaled until its mean target tokens
     per batch, as its own log reports them in a timed probe
     (`probe_eole`), equal this run's (`target_tokens`), timed and
     matched again at a size far from the probe's (`matched_batch`);
   - a schedule of its own that ends decayed: eole's `cosine` schedule, a
     linear warm-up then a cosine to zero at `train_steps`, set to the
     updates the probe's speed buys in the budget (`plan_steps`);
   - a learning rate chosen by a sweep: one full-budget run at each of
     `LEARNING_RATE_SWEEP` times this run's peak rate, and, while the best
     of them is the lowest or the highest rate tried, one more at half the
     lowest or twice the highest (`next_rate_factor`, at most
     `EXTRA_SWEEP_RUNS`), so that the chosen rate is bracketed; its checkpoint
     chosen on its own validation set (this run's validation pairs):
     eole validates and saves `VALIDATIONS` times a run, and the
     checkpoint with the lowest validation perplexity (eole's own
     early-stopping criterion) of the lowest-perplexity run translates
     the test split, with the paper's beam and the length penalty that
     scored best on the validation pairs (`choose_alpha`, as this package
     chooses its own);
   - the rest from eole's documented WMT17 English-German recipe
     (`EOLE_RECIPE`): AdamW with beta2 0.998, label smoothing 0.1,
     Xavier-uniform initialisation, shared and tied embeddings.
   Each eole run gets the minutes this package had, its share of
   `eole build_vocab` (run once) included; the probe is not counted.

Both sides are then scored with the same sacreBLEU and chrF
(`decoding.evaluation.score`) against the same references; `UNEQUAL`
lists what still differs. Called again on the same folder, the command
goes on from what the earlier call finished on the same inputs (this
package's run, eole's vocabulary and probes, each of its runs).
"""

import dataclasses
import glob
import hashlib
import json
import math
import os
import re
import signal
import subprocess
import time

from keras_transformer.cli.benchmark import PEER_EXTRA_RUNS, PEER_RATES
from keras_transformer.config import PAPER_BEAM_SIZE, RunConfig, parse_minutes
from keras_transformer.data import pipeline, sources
from keras_transformer.data.tokenizer import Tokenizer
from keras_transformer.decoding import evaluation
from keras_transformer.files import atomic_open
from keras_transformer.modeling import presets
from keras_transformer.modeling.special_ids import PAD_ID
from keras_transformer.run_dir import RunDir
from keras_transformer.training import budget, model_choice
from keras_transformer.training.optimization import TransformerSchedule

EOLE_RECIPE = "eole-nlp/eole recipes/wmt17/wmt17_ende_spm.yaml"
# eole's peak learning rates tried, as multiples of this package's run's peak
# (`peak_learning_rate`): a quarter, half and the same. The WMT17 recipe's own
# peak (noam factor 2, warm-up 8,000, width 512) is 9.9e-4; at the small
# preset's width and a few hundred updates of warm-up this run's is about 3e-3.
# On LibreOffice at 25 minutes eole's best was half ours of half, once and
# twice (perplexity 54.20, 119.97, 244.02), then a quarter of a quarter, half,
# once and an eighth (99.89, 103.83, 149.22, 173.24), then, with the run's
# dropout (none), a quarter again (32.35, 40.81, 98.38, 50.62; all in
# docs/benchmarks.md and CHANGELOG.md at 28bd8c9). The flags' defaults (`--peer-rates`).
LEARNING_RATE_SWEEP = PEER_RATES
# Runs added beyond the sweep's ends while its best rate is at one of them
# (`next_rate_factor`), so that a worse rate lies on each side of the chosen one.
EXTRA_SWEEP_RUNS = PEER_EXTRA_RUNS
# eole validates (perplexity on the validation pairs) and saves a checkpoint
# this many times a run, as this package's budget aims to.
VALIDATIONS = budget.INTERVALS
# Seconds of eole training timed to measure its speed and its batches (not
# counted in its budget); it logs every PROBE_REPORT_EVERY updates.
PROBE_SECONDS = 150.0
PROBE_REPORT_EVERY = 5
# A batch_size this far from the first probe's is timed again (`needs_second_probe`): scaled from
# 4,096 to 5,360 on LibreOffice, the first probe's 0.80 s an update planned 1.05 s where eole made
# 1.1-1.2, and its run would have ended short of its schedule's end.
REPROBE_TOLERANCE = 0.1
# A share of its minutes an eole run may go past them to make its last planned update, so that a
# slower stretch than its probe timed does not stop it before its schedule's end (a run stopped
# early keeps a checkpoint with its rate well above zero).
OVERRUN_SHARE = 0.05
# Of the time a run has after its start-up, the share planned for updates:
# the rest covers its validations and checkpoints (eole has no time budget
# of its own, and a run stopped short of `train_steps` ends undecayed).
STEPS_SHARE = 0.93
# A ratio over a peer BLEU below this compares noise (said where printed).
MEANINGFUL_BLEU = 5.0
# What the comparison still does not make equal (printed with the scores).
UNEQUAL = (
    "eole's learning rate is the best of three to five full-budget runs, chosen on its validation set; this "
    "package trains once",
    f"eole's speed probes are not counted in its budget, and a run may go {OVERRUN_SHARE:.0%} past its minutes to "
    "make its last update",
    "eole chooses its checkpoint by validation perplexity, this package among its last checkpoint and "
    "averages by validation BLEU",
    "eole's schedule is a cosine to zero, this package's the paper's inverse square root with a linear "
    "cool-down to zero",
    "eole's AdamW has beta2 0.998 (its recipe), this package's Adam 0.98 (the paper)",
    "both choose their length penalty among 0.6-1.2 by validation BLEU, eole on all the run's validation pairs, "
    "this package on the 200 its model choice scores",
)


@dataclasses.dataclass(frozen=True)
class PeerResult:
    """One side of the comparison: its test scores and what it made of the budget."""

    name: str
    scores: dict
    updates: int
    train_seconds: float


@dataclasses.dataclass(frozen=True)
class EoleProbe:
    """What a timed run of eole measured: seconds per update in its steady
    state, seconds before its first update, and its mean target tokens per
    batch at `batch_size`, in `compute_dtype`."""

    compute_dtype: str
    batch_size: int
    seconds_per_update: float
    startup_seconds: float
    target_tokens: float


def peak_learning_rate(config):
    """The highest learning rate of this package's run `config`: its schedule at the end of its warm-up."""
    schedule = TransformerSchedule(presets.get_preset(config.preset).d_model, config.warmup_steps,
                                   config.learning_rate_scale)
    return float(schedule(config.warmup_steps))


def eole_config(config, spm_model, paths, *, learning_rate, train_steps, batch_size, compute_dtype,
                valid_steps, report_every=10):
    """eole's training config (a dict; JSON is YAML) for the run `config` of
    this package: its preset's size, vocabulary model, length cut, warm-up
    and seed; eole's `batch_size`, peak `learning_rate` (cosine schedule to
    zero at `train_steps`), `compute_dtype` and `valid_steps` (a checkpoint
    at each validation); the run's dropout (the recipe's choice for its
    corpus and budget) and attention dropout; the rest from `EOLE_RECIPE`.
    `paths`: {"train_src", "train_tgt", "valid_src", "valid_tgt", "vocab",
    "model"}, absolute."""
    size = presets.get_preset(config.preset)
    return {
        "save_data": os.path.join(os.path.dirname(paths["model"]), "samples"),
        "overwrite": True,
        "seed": config.seed,
        "report_every": report_every,
        "src_vocab": paths["vocab"], "tgt_vocab": paths["vocab"], "share_vocab": True,
        "src_vocab_size": config.vocab_size, "tgt_vocab_size": config.vocab_size, "vocab_size_multiple": 8,
        "data": {"corpus_1": {"path_src": paths["train_src"], "path_tgt": paths["train_tgt"]},
                 "valid": {"path_src": paths["valid_src"], "path_tgt": paths["valid_tgt"]}},
        "transforms": ["sentencepiece", "filtertoolong"],
        "transforms_configs": {
            "sentencepiece": {"src_subword_model": spm_model, "tgt_subword_model": spm_model},
            "filtertoolong": {"src_seq_length": config.max_length, "tgt_seq_length": config.max_length}},
        "training": {
            "model_path": paths["model"], "keep_checkpoint": -1, "save_checkpoint_steps": valid_steps,
            "valid_steps": valid_steps, "train_steps": int(train_steps),
            "world_size": 1, "gpu_ranks": [], "num_workers": 0,
            "batch_type": "tokens", "batch_size": int(batch_size), "batch_size_multiple": 8,
            "accum_count": [1], "accum_steps": [0], "compute_dtype": compute_dtype,
            "optim": "adamw", "learning_rate": float(learning_rate), "warmup_steps": config.warmup_steps,
            "decay_method": "cosine", "adam_beta2": 0.998, "dropout_steps": [0],
            "dropout": [presets.resolved_dropout(config.preset, config.dropout)],
            "attention_dropout": [size.attention_dropout], "max_grad_norm": 0, "label_smoothing": 0.1,
            "param_init_method": "xavier_uniform", "normalization": "tokens"},
        "model": {
            "architecture": "transformer", "hidden_size": size.d_model, "layers": size.num_layers,
            "heads": size.num_heads, "transformer_ff": size.d_ff,
            "share_decoder_embeddings": True, "share_embeddings": True,
            "embeddings": {"word_vec_size": size.d_model, "position_encoding_type": "SinusoidalInterleaved"}},
    }


_STEP = re.compile(r"Step (\d+)(?:/\s*\d+)?;.*?bsz:\s*([\d.]+)/\s*([\d.]+)/\s*([\d.]+);.*?([\d.]+) sec;")
_PERPLEXITY = re.compile(r"Validation perplexity: ([\d.eE+-]+|inf|nan)")


def step_reports(log):
    """[(update, target tokens per batch, seconds since training began)] from eole's log text."""
    return [(int(m.group(1)), float(m.group(3)), float(m.group(5))) for m in _STEP.finditer(log)]


def validation_perplexities(log, valid_steps):
    """{update: validation perplexity} from eole's log text: eole validates at
    every multiple of `valid_steps`, in order."""
    return {valid_steps * (i + 1): float(m.group(1)) for i, m in enumerate(_PERPLEXITY.finditer(log))}


def probe_from_log(log, compute_dtype, batch_size, probe_seconds):
    """The `EoleProbe` of a probe run's log, which ran `probe_seconds` in all.
    The speed is that of the updates after the first report (before it, eole
    reads and tokenizes its corpus); the start-up is the rest of the time:
    the probe's seconds less its updates at that speed, and half a report's
    updates (the time since the last report, on average). ValueError if the
    log holds fewer than three reports."""
    reports = step_reports(log)
    if len(reports) < 3:
        raise ValueError(f"eole made {reports[-1][0] if reports else 0} updates in its {probe_seconds:.0f}-second "
                         f"probe; too few to time it.")
    (first, _, first_seconds), (last, _, last_seconds) = reports[0], reports[-1]
    seconds = (last_seconds - first_seconds) / (last - first)
    startup = max(0.0, probe_seconds - seconds * (last + PROBE_REPORT_EVERY / 2.0))
    tokens = sum(r[1] for r in reports) / len(reports)
    return EoleProbe(compute_dtype, int(batch_size), seconds, startup, tokens)


def matched_batch_size(probe, target_tokens, multiple=8):
    """eole's `batch_size` whose batches hold `target_tokens` target tokens on
    average, from the probe's (a batch's tokens grow in proportion to it)."""
    size = probe.batch_size * target_tokens / probe.target_tokens
    return max(multiple, int(round(size / multiple)) * multiple)


def needs_second_probe(probe, batch_size):
    """Whether eole's `batch_size` is more than REPROBE_TOLERANCE from the
    `probe`'s, whose speed would then be scaled too far to plan by."""
    return abs(batch_size / probe.batch_size - 1.0) > REPROBE_TOLERANCE


def matched_batch(probe, target_tokens, reprobe):
    """(eole's `batch_size`, the `EoleProbe` to plan it by) for batches of
    `target_tokens` target tokens: matched on `probe`, then, when that size
    is more than REPROBE_TOLERANCE from the probe's (`needs_second_probe`),
    timed at that size by `reprobe(batch_size)` and matched again on what
    that second probe measured, as eole's tokens do not grow quite in
    proportion to its `batch_size` (on LibreOffice, scaled from 2,048 to
    2,408 for 1,928 tokens, its batches held 1,851)."""
    batch_size = matched_batch_size(probe, target_tokens)
    if needs_second_probe(probe, batch_size):
        probe = reprobe(batch_size)
        batch_size = matched_batch_size(probe, target_tokens)
    return batch_size, probe


def plan_steps(probe, batch_size, seconds, corpus_tokens):
    """eole's `train_steps` for a run of `seconds` at `batch_size`: its updates
    cost the probe's time scaled by the batch, after its start-up, in
    STEPS_SHARE of the time (the rest for its validations). eole reads and
    tokenizes its corpus again at each pass (in the training process, its
    `num_workers` 0 here), as long as its start-up took: each update also
    costs its share of a pass over the `corpus_tokens` target tokens. On
    LibreOffice that was 30 s every 160 updates of 1 s, which a probe of
    150 s never sees."""
    scale = batch_size / probe.batch_size
    per_update = (probe.seconds_per_update * scale
                  + probe.startup_seconds * probe.target_tokens * scale / corpus_tokens)
    steps = int(STEPS_SHARE * (seconds - probe.startup_seconds) / per_update)
    if steps < VALIDATIONS:
        raise ValueError(f"eole would make {max(steps, 0)} updates in {seconds / 60.0:.1f} minutes at "
                         f"{per_update:.2f} s each; a longer --time-budget is needed.")
    return steps


def chosen_checkpoint(model_path, perplexities):
    """(folder, updates, perplexity) of the checkpoint in `model_path` with
    the lowest validation perplexity; the last checkpoint (perplexity None)
    if none of the validated ones was saved. ValueError if there is none."""
    saved = checkpoints(model_path)
    scored = [(perplexities[updates], updates) for updates in saved if updates in perplexities]
    if scored:
        perplexity, updates = min(scored)
        return saved[updates], updates, perplexity
    if not saved:
        raise ValueError(f"eole wrote no checkpoint in {model_path!r} in the budget; see its train.log beside it.")
    updates = max(saved)
    return saved[updates], updates, None


def target_tokens(config):
    """(mean per batch, all) target tokens, padding left out, of one pass of
    this package's run `config` over its training split in its bucketed
    batches."""
    tokenizer = Tokenizer(RunDir(config.model_dir).vocabulary_path)
    pairs, _ = sources.load_split(config.data, "train")
    batches = pipeline.make_batches(pairs, tokenizer, config.batch_tokens, config.max_length, training=False,
                                    drop_remainder=True)
    tokens = count = 0
    for _, target_out in batches.as_numpy_iterator():
        tokens += int((target_out != PAD_ID).sum())
        count += 1
    return tokens / max(count, 1), tokens


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


def checkpoints(model_path):
    """{updates: folder} of the complete `step_N` checkpoints eole wrote in `model_path`."""
    return {int(m.group(1)): path for path in glob.glob(os.path.join(model_path, "step_*"))
            if (m := re.fullmatch(r"step_(\d+)", os.path.basename(path)))
            and os.path.exists(os.path.join(path, "config.json"))}


def ours(dataset, test, minutes, model_dir):
    """This package's side: the default recipe at `minutes`, or the run an
    earlier call finished in `model_dir` with the same flags. Returns
    (PeerResult, its RunConfig). ValueError if `model_dir` holds a finished
    run of other flags."""
    from keras_transformer.training import recipe  # noqa: PLC0415  (the benchmark's top layer)

    config = RunConfig(dataset=dataset, test=test, time_budget=str(minutes), model_dir=model_dir, export_dir="")
    run_dir = RunDir(model_dir)
    if run_dir.has_config() and os.path.exists(run_dir.hypotheses_path("test")):  # an earlier call's, finished
        finished = run_dir.load_config()
        given = (finished.dataset, finished.test,
                 parse_minutes(finished.time_budget) if finished.time_budget else None)
        if given != (dataset, test, parse_minutes(str(minutes))):
            raise ValueError(f"{model_dir!r} holds a finished run of --dataset {finished.dataset!r} --test "
                             f"{finished.test!r} --time-budget {finished.time_budget}; give another --peer-dir.")
        result, config, _ = finished_run(model_dir)
        print(f"keras_transformer: the run an earlier call finished in {model_dir}", flush=True)
        return result, config
    recipe.train_and_evaluate(config, fixed={"dataset", "test", "time_budget", "model_dir", "export_dir"})
    result, config, _ = finished_run(model_dir)
    return result, config


def finished_run(model_dir):
    """This package's side from a run that `train.py --time-budget M --test T`
    finished in `model_dir`: its test translations scored against the test
    references, its updates and training seconds. Returns (PeerResult, its
    RunConfig, its budget's minutes as text). ValueError, naming what is missing, if
    the run had no time budget or did not translate its test split."""
    run_dir = RunDir(model_dir)
    config = run_dir.load_config()
    record = budget.load(run_dir)
    if record is None or not record.updates:
        raise ValueError(f"{run_dir.budget_path!r} does not record a finished --time-budget run; the comparison "
                         "gives eole the budget of such a run.")
    hypotheses_path = run_dir.hypotheses_path("test")
    if not config.test or not os.path.exists(hypotheses_path):
        raise ValueError(f"{hypotheses_path!r} does not exist; the run must have translated a test split "
                         "(train.py --test).")
    _, references = sources.read_split(config.data, "test")
    scores = evaluation.score(read_lines(hypotheses_path), references)
    return (PeerResult("keras_transformer", scores, record.updates, record.spent), config,
            f"{record.budget_minutes:g}")


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def probe_eole(eole, settings, config_path, log, compute_dtype):
    """Times PROBE_SECONDS of `eole train` on `settings` (no validation, no
    checkpoint) in `compute_dtype`: its `EoleProbe`. ValueError, naming the
    log, if eole trained too little to time."""
    settings = json.loads(json.dumps(settings))
    settings["training"].update(compute_dtype=compute_dtype, train_steps=1_000_000, valid_steps=1_000_000,
                                save_checkpoint_steps=0)
    settings["report_every"] = PROBE_REPORT_EVERY
    with open(config_path, "w", encoding="utf-8") as f:
        json.dump(settings, f, indent=1)
    if os.path.exists(log):
        os.remove(log)
    start = time.monotonic()
    run_until([eole, "train", "--config", config_path], start + PROBE_SECONDS, log)
    try:
        return probe_from_log(_read(log), compute_dtype, settings["training"]["batch_size"],
                              time.monotonic() - start)
    except ValueError as error:
        raise ValueError(f"{error} See {log}.") from None


def eole_side(config, eole, minutes, work_dir, rates=LEARNING_RATE_SWEEP):
    """eole at its best (the module's docstring) on the training split,
    vocabulary and validation pairs of this package's run `config`, its
    sweep starting at `rates` times this run's peak rate. What an earlier
    call in `work_dir` finished on the same inputs (its vocabulary and
    probes, `plan.json`; each full run, `lr<factor>.json`) is taken as it
    is (`reusable`), so a command stopped part way loses only the run it
    was in. Returns its `PeerResult` and what it did, also written to
    choice.json: {"compute_dtype", "batch_size", "target_tokens" (eole's
    per batch in its probe), "ours_target_tokens", "runs": [{"factor" (of
    this run's peak rate), "learning_rate", "updates", "chosen",
    "perplexity", "checkpoint", "train_seconds"}], "alpha", "alpha_scores"
    (`choose_alpha`)}."""
    os.makedirs(work_dir, exist_ok=True)

    def work(name):  # eole runs with absolute paths
        return os.path.abspath(os.path.join(work_dir, name))

    budget_seconds = parse_minutes(str(minutes)) * 60.0
    paths, pairs = split_files(config, work)
    spm_model = os.path.abspath(RunDir(config.model_dir).vocabulary_path)
    if not os.path.exists(spm_model):
        raise ValueError(f"{spm_model!r} does not exist; eole is given the SentencePiece model of this package's run.")

    def settings(model, **kwargs):
        return eole_config(config, spm_model, {**paths, "model": work(model)}, **kwargs)

    inputs, plan = planned(eole, config, settings, {**paths, "spm_model": spm_model}, budget_seconds, work, pairs)
    runs = sweep(eole, settings, plan, inputs, work, rates, peak_learning_rate(config), budget_seconds)
    best = best_run(runs)
    alpha, alpha_scores, scores = test_best(eole, config, best["checkpoint"], paths["valid_src"], work)
    details = {"compute_dtype": plan["probe"]["compute_dtype"], "batch_size": plan["batch_size"],
               "target_tokens": plan["probe"]["target_tokens"], "ours_target_tokens": plan["ours_target_tokens"],
               "runs": runs, "alpha": alpha, "alpha_scores": alpha_scores}
    with open(work("choice.json"), "w", encoding="utf-8") as f:
        json.dump(details, f, indent=1)
    return PeerResult("eole", scores, best["chosen"], best["train_seconds"]), details


def split_files(config, work):
    """The run's training and validation splits written as eole's line files
    (`work(name)` makes a path); returns ({"train_src", ..., "vocab"}: paths,
    {"train", "valid"}: pairs)."""
    paths, pairs = {"vocab": work("vocab.shared")}, {}
    for split in ("train", "validation"):
        side_sources, side_targets = sources.read_split(config.data, split)
        short = "valid" if split == "validation" else split
        paths[f"{short}_src"], paths[f"{short}_tgt"] = work(f"{short}.src"), work(f"{short}.tgt")
        write_lines(paths[f"{short}_src"], side_sources)
        write_lines(paths[f"{short}_tgt"], side_targets)
        pairs[short] = len(side_sources)
    return paths, pairs


def planned(eole, config, settings, paths, budget_seconds, work, pairs):
    """(what the plan depends on, eole's plan: `eole_plan`), the plan of an
    earlier call on the same inputs when there is one. What the vocabulary
    and the probes depend on: the eole command, eole's settings, this run's
    precision (eole's follows it), the budget and the files' contents."""
    probe_settings = settings("probe/model", learning_rate=peak_learning_rate(config), train_steps=1_000_000,
                              batch_size=config.batch_tokens, compute_dtype="fp32", valid_steps=1_000_000)
    inputs = {"eole": eole, "settings": probe_settings, "precision": config.precision, "budget_seconds": budget_seconds,
              "files": {name: fingerprint(path) for name, path in sorted(paths.items()) if name != "vocab"}}
    plan = reusable(work("plan.json"), inputs)
    if plan is None:
        plan = eole_plan(eole, config, probe_settings, budget_seconds, work, pairs)
        save_record(work("plan.json"), inputs, plan)
    else:
        print(f"eole: the vocabulary and speed probes of an earlier call in {os.path.dirname(work('plan.json'))} "
              "(same split, vocabulary, settings and budget)", flush=True)
    probe = EoleProbe(**plan["probe"])
    print(f"eole: {probe.compute_dtype}, {probe.seconds_per_update:.2f} s an update at batch_size "
          f"{probe.batch_size} ({probe.target_tokens:,.0f} target tokens a batch, ours "
          f"{plan['ours_target_tokens']:,.0f}): batch_size {plan['batch_size']}, {plan['steps']} updates a run, a "
          f"validation and checkpoint every {plan['valid_steps']}", flush=True)
    return inputs, plan


def sweep(eole, settings, plan, inputs, work, rates, peak, budget_seconds):
    """eole's full-budget runs at `rates` times this run's `peak` rate, and
    up to `EXTRA_SWEEP_RUNS` beyond the sweep's ends while its best is the
    lowest or highest tried (`next_rate_factor`); each run an earlier call
    finished on the same inputs is taken as it is. Returns the runs."""
    runs, factors = [], list(rates)
    while factors:
        factor = factors.pop(0)
        rate, name = factor * peak, f"lr{factor:g}"
        run_settings = settings(f"{name}/model", learning_rate=rate, train_steps=plan["steps"],
                                batch_size=plan["batch_size"], compute_dtype=plan["probe"]["compute_dtype"],
                                valid_steps=plan["valid_steps"])
        run_inputs = {"plan": inputs, "settings": run_settings}
        run = reusable(work(f"{name}.json"), run_inputs)
        if run is None:
            run = eole_run(eole, run_settings, work, name, factor, budget_seconds - plan["vocab_seconds"],
                           plan["vocab_seconds"])
            save_record(work(f"{name}.json"), run_inputs, run)
        else:
            print(f"eole: learning rate {rate:.2e} ({factor:g}x ours): the run an earlier call finished",
                  flush=True)
        runs.append(run)
        said = "no validation" if run["perplexity"] is None else f"validation perplexity {run['perplexity']:.2f}"
        print(f"eole: learning rate {rate:.2e}: {run['updates']} updates saved; chosen: update {run['chosen']} "
              f"({said})", flush=True)
        if not factors:
            extra = next_rate_factor(runs, rates)
            if extra is not None:
                end = "lowest" if extra < factor else "highest"
                print(f"eole: the best rate so far is the {end} tried; trying {extra:g}x ours", flush=True)
                factors.append(extra)
    return runs


def test_best(eole, config, checkpoint, valid_source, work):
    """The chosen `checkpoint`'s length penalty, chosen on the validation
    pairs (`choose_alpha`), and its test translations at it, scored: returns
    (alpha, each alpha's validation scores, the test scores)."""
    references = sources.read_split(config.data, "validation")[1]
    print(f"eole: choosing the length penalty among {', '.join(f'{a:g}' for a in model_choice.ALPHAS)} on its "
          f"{len(references):,} validation pairs", flush=True)
    alpha, alpha_scores = choose_alpha(eole, checkpoint, valid_source, references, work)
    sentences, references = sources.read_split(config.data, "test")
    write_lines(work("test.src"), sentences)
    print(f"eole: translating {len(sentences):,} test sentences with {checkpoint}, alpha {alpha:g}", flush=True)
    hypotheses = predict(eole, checkpoint, work("test.src"), work("test.hypotheses.txt"), alpha, work("predict.log"))
    return alpha, alpha_scores, evaluation.score(hypotheses, references)


def eole_plan(eole, config, probe_settings, budget_seconds, work, pairs):
    """eole's vocabulary (`eole build_vocab`, timed: each run's budget
    includes it) and its plan from timed probes: {"vocab_seconds", "probe"
    (the `EoleProbe` planned by, as a dict), "batch_size", "steps",
    "valid_steps", "ours_target_tokens"}. `work(name)`: a path in eole's folder."""
    with open(work("config.yaml"), "w", encoding="utf-8") as f:
        json.dump(probe_settings, f, indent=1)
    print(f"eole: {pairs['train']:,} training and {pairs['valid']:,} "
          "validation pairs; build_vocab on the training pairs", flush=True)
    log = work("build_vocab.log")
    start = time.monotonic()
    code, stopped = run_until([eole, "build_vocab", "--config", work("config.yaml"), "--n_sample", "-1"],
                              start + budget_seconds, log)
    if code or stopped:
        raise ValueError(f"eole build_vocab {'ran out of the budget' if stopped else f'failed ({code})'}; "
                         f"see {log}.")
    vocab_seconds = time.monotonic() - start

    dtype = "bf16" if config.precision == "mixed_bfloat16" else "fp32"
    print(f"eole: timing {PROBE_SECONDS:.0f} s of training in {dtype} (not counted in its budget)", flush=True)
    try:
        probe = probe_eole(eole, probe_settings, work("probe.yaml"), work("probe.log"), dtype)
    except ValueError as error:
        if dtype == "fp32":
            raise
        print(f"eole: its bfloat16 failed on this machine ({error}); float32 instead", flush=True)
        probe = probe_eole(eole, probe_settings, work("probe.yaml"), work("probe_fp32.log"), "fp32")
    ours_tokens, corpus_tokens = target_tokens(config)

    def reprobe(batch_size, dtype=probe.compute_dtype):
        print(f"eole: timing {PROBE_SECONDS:.0f} s more at batch_size {batch_size} (not counted)", flush=True)
        settings = json.loads(json.dumps(probe_settings))
        settings["training"]["batch_size"] = batch_size
        return probe_eole(eole, settings, work("probe.yaml"), work("probe_matched.log"), dtype)

    batch_size, probe = matched_batch(probe, ours_tokens, reprobe)
    steps = plan_steps(probe, batch_size, budget_seconds - vocab_seconds, corpus_tokens)
    return {"vocab_seconds": vocab_seconds, "probe": dataclasses.asdict(probe), "batch_size": batch_size,
            "steps": steps, "valid_steps": max(1, steps // VALIDATIONS), "ours_target_tokens": ours_tokens}


def eole_run(eole, settings, work, name, factor, seconds, vocab_seconds):
    """One full-budget `eole train` of `settings` (its config `work(name +
    ".yaml")`, its log `work(name + ".log")`) for `seconds` (and up to
    OVERRUN_SHARE more), then its checkpoint chosen on validation
    perplexity. Returns {"factor", "learning_rate", "updates", "chosen",
    "perplexity", "checkpoint", "train_seconds" (`vocab_seconds` included)}."""
    training = settings["training"]
    with open(work(f"{name}.yaml"), "w", encoding="utf-8") as f:
        json.dump(settings, f, indent=1)
    log = work(f"{name}.log")
    if os.path.exists(log):
        os.remove(log)
    print(f"eole: learning rate {training['learning_rate']:.2e} ({factor:g}x ours) for {seconds / 60.0:.1f} "
          f"minutes (log: {log})", flush=True)

    def progress(seconds_left):  # eole's own progress goes to its log
        saved = checkpoints(training["model_path"])
        made = f"{max(saved)} updates saved" if saved else "no checkpoint yet"
        print(f"eole: training, {made}, {seconds_left / 60.0:.1f} minutes left", flush=True)

    run_start = time.monotonic()
    run_until([eole, "train", "--config", work(f"{name}.yaml")], run_start + (1.0 + OVERRUN_SHARE) * seconds, log,
              report=progress)
    train_seconds = vocab_seconds + time.monotonic() - run_start
    perplexities = validation_perplexities(_read(log), training["valid_steps"])
    checkpoint, updates, perplexity = chosen_checkpoint(training["model_path"], perplexities)
    return {"factor": factor, "learning_rate": training["learning_rate"],
            "updates": max(checkpoints(training["model_path"])), "chosen": updates, "perplexity": perplexity,
            "checkpoint": checkpoint, "train_seconds": train_seconds}


def predict(eole, checkpoint, source, output, alpha, log):
    """`checkpoint`'s translations of the lines of `source` (written to
    `output`) with the paper's beam and eole's length penalty of Wu et al.
    at `alpha`, as this package's. ValueError, naming the log, if eole fails."""
    code, _ = run_until([eole, "predict", "--model_path", checkpoint, "--src", source, "--output", output,
                         "--beam_size", str(PAPER_BEAM_SIZE), "--length_penalty", "wu", "--alpha", f"{alpha:g}",
                         "--max_length", "256", "--batch_size", "32", "--batch_type", "sents", "--world_size", "1"],
                        float("inf"), log)
    if code:
        raise ValueError(f"eole predict failed ({code}); see {log}.")
    return read_lines(output)


def choose_alpha(eole, checkpoint, source, references, work, alphas=model_choice.ALPHAS):
    """The length penalty of `alphas` under which `checkpoint` translates
    `source` (eole's validation pairs) best, as this package chooses its own
    (`model_choice.best_alpha`: BLEU, then chrF, ties to the earlier).
    Returns (alpha, {alpha as text: {"bleu", "chrf", "exact_match"}})."""
    scores = {}
    for alpha in alphas:
        hypotheses = predict(eole, checkpoint, source, work(f"valid.alpha{alpha:g}.txt"), alpha,
                             work("predict_validation.log"))
        figures = evaluation.score(hypotheses, references)
        scores[alpha] = {k: figures[k] for k in ("bleu", "chrf", "exact_match")}
    return float(model_choice.best_alpha(scores, alphas)), {f"{a:g}": s for a, s in scores.items()}


def fingerprint(path):
    """The SHA-256 of the file at `path`, in hex."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def save_record(path, inputs, outcome):
    """Writes what a stage made of `inputs` (JSON-able) to `path`, whole or not at all (`files.atomic_open`)."""
    with atomic_open(path) as f:
        json.dump({"inputs": inputs, "outcome": outcome}, f, indent=1)


def reusable(path, inputs):
    """What a stage recorded at `path` (`save_record`) if it ran on the same
    `inputs` (compared as JSON), else None."""
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        record = json.load(f)
    return record["outcome"] if record.get("inputs") == json.loads(json.dumps(inputs)) else None


def best_run(runs):
    """The run of `runs` (dicts with "perplexity", None when it never validated) with the lowest perplexity."""
    return min(runs, key=lambda run: math.inf if run["perplexity"] is None else run["perplexity"])


def next_rate_factor(runs, rates=LEARNING_RATE_SWEEP):
    """The next learning rate to try after a sweep that started at `rates`,
    as a multiple of this package's peak, or None: half the lowest rate
    tried when the best run (`best_run`) is the lowest-rate one, twice the
    highest when it is the highest-rate one, None when a lower and a higher
    rate both did worse or `EXTRA_SWEEP_RUNS` beyond `rates` are spent.
    `runs` hold "factor" and "perplexity"."""
    if len(runs) >= len(rates) + EXTRA_SWEEP_RUNS:
        return None
    factors = [run["factor"] for run in runs]
    best = best_run(runs)["factor"]
    if best == min(factors):
        return best / 2.0
    if best == max(factors):
        return best * 2.0
    return None


def ratio(ours_score, peer_score):
    """`ours / peer` as printed: "2.10x"; a zero gives no ratio."""
    if not peer_score:
        return "undefined (eole: 0)"
    return f"{ours_score / peer_score:.2f}x"


def compare(dataset, test, minutes, eole, work_dir, rates=LEARNING_RATE_SWEEP, ours_dir=None):
    """Both sides at `minutes`, in `work_dir` (this package's run in `ours`,
    eole's in `eole`), eole's sweep starting at `rates`. With `ours_dir`,
    this package's side is the run finished there (`finished_run`), and
    `dataset`, `test` and `minutes` are its own. Prints and returns (ours,
    eole) `PeerResult`s."""
    if ours_dir is None:
        mine, config = ours(dataset, test, minutes, os.path.join(work_dir, "ours"))
    else:
        mine, config, minutes = finished_run(ours_dir)
        print(f"keras_transformer: the run in {ours_dir} ({minutes} minutes, {mine.updates:,} updates), "
              f"test sacreBLEU {mine.scores['bleu']:.2f} from its translations", flush=True)
    peer, details = eole_side(config, eole, minutes, os.path.join(work_dir, "eole"), rates)
    tried = ", ".join(f"{run['learning_rate']:.2e}" for run in details["runs"])
    print(f"\nSame split, {config.preset} preset size, {config.vocab_size}-piece SentencePiece model, "
          f"{minutes} minutes a run. eole ({EOLE_RECIPE}'s settings): {details['compute_dtype']}, batch_size "
          f"{details['batch_size']} for this run's {details['ours_target_tokens']:,.0f} target tokens a batch, "
          f"warm-up {config.warmup_steps} then a cosine to zero, learning rates {tried}, its checkpoint chosen "
          f"by validation perplexity, its length penalty (alpha {details['alpha']:g}) by validation BLEU:")
    for side in (mine, peer):
        print(f"peer {side.name:<17s} test sacreBLEU {side.scores['bleu']:6.2f}  chrF {side.scores['chrf']:6.2f}  "
              f"{side.updates:5d} updates in {side.train_seconds / 60.0:5.1f} min")
    print(f"peer keras_transformer / eole sacreBLEU: {ratio(mine.scores['bleu'], peer.scores['bleu'])}"
          + (f" (eole below {MEANINGFUL_BLEU:g} BLEU: not a meaningful ratio)"
             if 0 < peer.scores["bleu"] < MEANINGFUL_BLEU else "")
          + f"  chrF: {ratio(mine.scores['chrf'], peer.scores['chrf'])}  ({mine.scores['bleu_signature']})")
    print("Still unequal: " + "; ".join(UNEQUAL) + ".")
    return mine, peer
