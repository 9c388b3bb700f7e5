"""The end-to-end recipe that `scripts/train.py` runs: train, choose the model, test, export.

It is, with the CLI, the one reader of the whole `RunConfig`: it fills in
the default folders, resolves the precision, records the run in its folder
(`start_run`) and hands each component its section.

`train_and_evaluate(config)` is the paper's whole procedure as one command,
a straight line of stages:
1. with a time budget (`plan_budget`), measure the corpus, choose the recipe
   (probing this machine) and start the budget's record;
2. train (or resume) with `trainer.train`, scoring validation BLEU after
   every checkpoint interval and keeping the best checkpoint (`train`);
3. average the last `config.average_last` kept checkpoints and score the
   last, the averaged and the best on the validation set with the run's
   beam search (`choose_trained_model`); with a time budget and no --alpha,
   choose the chosen model's length penalty on the same sentences
   (`choose_length_penalty`);
4. score the chosen model on the test split with sacreBLEU, chrF and
   sentence-level exact match, and show a few examples (`score_on_test`);
5. export it as a SavedModel for TF Serving.
Each stage hands the next a frozen record: `corpus_size.CorpusSize`,
`auto_config.Recipe`, `budget.Record` (the budget's, saved in the run
folder), `Trained`, `model_choice.ModelChoice`, `Tested` and `Exported`;
the command returns them as one `Outcome`. Under a time budget, training's
schedule reads the clock (`training.budget`), and each stage after training
is timed into the run's budget record (`PartClock`).
"""

import contextlib
import dataclasses
import time

import keras

from keras_transformer.config import INHERITED_BY_INIT_FROM, RESUME_MUST_MATCH, parse_minutes
from keras_transformer.data import corpus_size, pipeline, sources
from keras_transformer.decoding import evaluation
from keras_transformer.decoding.restore import make_translator
from keras_transformer.export import saved_model
from keras_transformer.modeling import presets
from keras_transformer.modeling.precision import resolve_precision
from keras_transformer.modeling.transformer import build_transformer
from keras_transformer.run_dir import RunDir, default_export_dir, default_model_dir
from keras_transformer.training import (auto_config, budget, distribution, fine_tuning, model_choice, open_ended,
                                        optimization, trainer)
from keras_transformer.training.vocabulary import load_tokenizer


@dataclasses.dataclass(frozen=True)
class Trained:
    """What training hands on: the run's config as recorded (with what the
    recipe chose), the model at its last weights, its tokenizer and strategy,
    the seconds from the command's start to training's end, and the updates
    made (the optimizer's count, a resumed run's earlier ones included)."""

    config: object
    model: object
    tokenizer: object
    strategy: object
    seconds: float
    updates: int


@dataclasses.dataclass(frozen=True)
class Tested:
    """The test's outcome: the `chosen` model's scores on the test split's
    `sentences` (sacreBLEU and chrF with their signatures, exact match in %)
    and the file its hypotheses were written to."""

    chosen: str
    sentences: int
    bleu: float
    chrf: float
    exact_match: float
    bleu_signature: str
    chrf_signature: str
    hypotheses_path: str


@dataclasses.dataclass(frozen=True)
class Exported:
    """The export's outcome: the SavedModel's folder and the dtype policy its model computes in."""

    path: str
    dtype_policy: str


@dataclasses.dataclass(frozen=True)
class Outcome:
    """The whole command's outcome: the run's final config (the recipe's
    choices and the chosen length penalty in it) and what each stage handed
    on. On a worker that is not the chief, only the config and training's
    figures are set (the chief chooses, tests and exports)."""

    config: object
    train_seconds: float
    updates: int
    choice: model_choice.ModelChoice = None
    test: Tested = None
    export: Exported = None  # None when the run was not exported (an empty --export-dir)
    total_seconds: float = None


def with_default_folders(config):
    """`config` with its unset folders filled in: runs/<dataset>-<preset> and
    saved_models/<dataset>, so that a run on another corpus or preset never
    resumes (or overwrites) the main job's. An empty export_dir stays empty
    (no export)."""
    slug = sources.dataset_slug(config.dataset)
    return dataclasses.replace(
        config,
        model_dir=default_model_dir(slug, config.preset) if config.model_dir is None else config.model_dir,
        export_dir=default_export_dir(slug) if config.export_dir is None else config.export_dir)


def resolved_precision(config, run_dir):
    """The dtype policy the run computes in: an explicit --precision, else the
    one a run being resumed recorded (so that "auto" never changes a run's
    policy on other hardware), else this machine's choice for "auto"."""
    if config.precision == "auto" and run_dir.has_config():
        recorded = run_dir.load_config().precision
        if recorded != "auto":
            return recorded
    return resolve_precision(config.precision)


def prepare_run_dir(config, run_dir):
    """Creates the run's folder and records `config` in it. A folder that
    already holds a run must hold one this config can resume
    (`RunConfig.check_resumes`); otherwise this raises ValueError and
    touches nothing. `config.precision` must already be resolved."""
    if run_dir.has_config():
        _blocks_resolved(config).check_resumes(_blocks_resolved(run_dir.load_config()))
    run_dir.save_config(config)


def _blocks_resolved(config):
    """`config` with an unset `norm_first` and depths made its preset's, so that
    a recorded None and a given --no-norm-first (or the preset's own depth)
    compare as the same model."""
    encoder_layers, decoder_layers = presets.run_depths(config)
    return dataclasses.replace(config, norm_first=presets.resolved_norm_first(config.preset, config.norm_first),
                               encoder_layers=encoder_layers, decoder_layers=decoder_layers)


def probe(config, run_dir, sample):
    """`probe(preset, vocab_size, batch_tokens, max_length)` -> seconds per
    update of that model on this machine, in the run's precision, timed by
    `fit` on batches of the run's pipeline (`budget.probe_seconds_per_update`).
    The batches come from `sample`, training pairs held in memory (the
    corpus measure's, `corpus_size.training_sample`): the file reader's
    thread stays out, as a training iterator dropped mid-stream with it
    behind could hang. The first call trains the run's vocabulary of
    `vocab_size` pieces into `run_dir`, where training then finds it; a
    preset's model is built once and timed at each batch size asked for."""
    models, vocabulary = {}, {}  # vocabulary: the one size the run trains, and its tokenizer
    # Before any tokenizer is made: seeding drops the kernels that hold their vocabularies.
    keras.utils.set_random_seed(config.seed)
    pairs = sources.from_pairs(sample)

    def seconds(preset, vocab_size, batch_tokens, max_length):
        if not vocabulary:  # the tokenizer is kept: its batches need its resource
            vocabulary[vocab_size] = load_tokenizer(dataclasses.replace(config.data, vocab_size=vocab_size), run_dir,
                                                    config.init_from)
        if vocab_size not in vocabulary:
            raise ValueError(f"The probe trained the run's vocabulary of {next(iter(vocabulary))} pieces; "
                             f"it cannot time one of {vocab_size}.")
        tokenizer = vocabulary[vocab_size]
        if preset not in models:
            model = build_transformer(preset, tokenizer.vocab_size, config.precision, **config.model.overrides())
            models[preset] = trainer.compile_model(model, config.training)
        batches = pipeline.make_batches(pairs, tokenizer, batch_tokens, max_length, training=True, seed=config.seed)
        return budget.probe_seconds_per_update(models[preset], batches)

    return seconds


def plan_budget(config, run_dir, started, fixed=()):
    """A time-budgeted run's config and the start of its `budget.Record`:
    resumed as recorded, or made by the recipe's stages on this machine:
    measure the corpus (`corpus_size.training_sample`), choose the recipe
    (`auto_config.choose`, which probes the machine on that sample) and
    schedule it on the clock (`scheduled`). `started`: the
    `time.monotonic()` at which this process began."""
    budget_seconds = parse_minutes(config.time_budget) * 60.0
    for name in {"steps", "checkpoint_every"} & set(fixed):
        raise ValueError(f"--time-budget ends training, and places its {budget.INTERVALS} checkpoints, by the "
                         f"clock; --{name.replace('_', '-')} is for runs without a budget.")
    if config.init_from:  # the run it starts from fixes the model's shape and vocabulary
        fixed = set(fixed) | set(INHERITED_BY_INIT_FROM)
    record = budget.load(run_dir) if run_dir.has_config() else None
    if record is not None:
        recorded = run_dir.load_config()
        # The budget and the data must be the run's, and so must what the user set; the recipe's choices are.
        _blocks_resolved(config).check_resumes(
            _blocks_resolved(recorded), [n for n in RESUME_MUST_MATCH if n not in auto_config.CHOSEN or n in fixed])
        print(f"Resuming a {recorded.time_budget}-minute budget: {record.spent / 60.0:.1f} minutes spent.",
              flush=True)
        resumed = dataclasses.replace(record, earlier=record.spent)
        return dataclasses.replace(recorded, model_dir=config.model_dir, export_dir=config.export_dir), resumed
    if config.strategy != "default":
        raise ValueError("--time-budget measures training on one device; use --strategy default.")
    print(f"Measuring the corpus and this machine for a {config.time_budget}-minute budget ...", flush=True)
    corpus, sample = measured_corpus(config)
    recipe = scheduled(auto_config.choose(config, corpus, budget_seconds, probe(config, run_dir, sample), fixed),
                       fixed)
    work = budget.Work(choice=len(model_choice.CANDIDATES),
                       alphas=0 if "alpha" in fixed else len(model_choice.ALPHAS) - 1,
                       test_sentences=len(sources.read_split(config.data, "test")[0]), export=bool(config.export_dir))
    record = budget.Record(budget_seconds / 60.0, work, recipe.reasons, spent=time.monotonic() - started)
    budget.check_fits(record, recipe.seconds_per_update)
    print("recipe:\n" + "\n".join(f"  {line}" for line in recipe.reasons), flush=True)
    return recipe.config, record


def measured_corpus(config):
    """(`CorpusSize` of `config`'s training split, the sample of pairs it was measured on)."""
    count, sample = corpus_size.training_sample(config.data, seed=config.seed)
    return corpus_size.from_pairs(count, sample), sample


def corpus_vocabulary(config):
    """The vocabulary size the recipe chooses for `config`'s corpus (`auto_config.vocabulary_size`)."""
    corpus, _ = measured_corpus(config)
    return auto_config.vocabulary_size(corpus.words, corpus.word_types)


def plan_open_ended(config, run_dir, fixed=()):
    """A run on a corpus of one's own with no end given (`open_ended.applies`):
    its config with the recipe's corpus-based choices, trained until
    validation BLEU stops improving (`open_ended.choose`), or as its first
    start recorded them when resumed. Prints the `recipe:` block."""
    if run_dir.has_config():
        recorded = run_dir.load_config()
        return dataclasses.replace(config, **{name: getattr(recorded, name) for name in open_ended.CHOSEN
                                              if name not in fixed})
    print("Measuring the corpus (no --time-budget or --steps: training runs until validation BLEU stops "
          "improving) ...", flush=True)
    recipe = open_ended.choose(config, measured_corpus(config)[0], fixed)
    print("recipe:\n" + "\n".join(f"  {line}" for line in recipe.reasons), flush=True)
    return recipe.config


def scheduled(recipe, fixed=()):
    """The `auto_config.Recipe` with its schedule on the clock in its config,
    and a line saying so: the warm-up of the preset's reference climb
    (`auto_config.reference_warmup`) at the paper's scale, then the paper's
    inverse square root, falling linearly to zero over the last
    `budget.COOLDOWN_SHARE` of training's time. What the user set (`fixed`)
    is kept."""
    config = recipe.config
    planned = {"warmup_steps": auto_config.reference_warmup(config.preset, config.norm_first),
               "learning_rate_scale": 1.0, "cooldown": budget.COOLDOWN_SHARE}
    config = dataclasses.replace(config, **{name: value for name, value in planned.items() if name not in fixed})
    line = (f"learning rate: warm-up {config.warmup_steps} updates at scale {config.learning_rate_scale:g}, then the "
            f"inverse square root, falling linearly to zero over the last {config.cooldown:.0%} of training's time; "
            f"a checkpoint at every {budget.INTERVALS}th of it")
    return dataclasses.replace(recipe, config=config, reasons=recipe.reasons + (line,))


def start_run(config, fixed=(), started=None):
    """Checks `config`, fills in its folders and precision (and, with a time
    budget, what the recipe chooses: `plan_budget`), builds the strategy and
    records the run in this worker's folder. `fixed`: the settings the user
    gave, which the recipe keeps; `started`: the `time.monotonic()` at which
    the command began (default: now). Returns (config, strategy, run_dir,
    `started`)."""
    started = time.monotonic() if started is None else started
    config = with_default_folders(config)
    presets.get_preset(config.preset)  # raises on unknown names, before any work
    auto = config.precision == "auto"
    config = dataclasses.replace(config, precision=resolved_precision(config, RunDir(config.model_dir)))
    print(f"Precision: {config.precision}" + (" (auto)" if auto else ""), flush=True)
    strategy = distribution.make_strategy(config.training.strategy)
    print(f"Strategy: {config.strategy}, {strategy.num_replicas_in_sync} replica(s) in sync", flush=True)
    run_dir = distribution.worker_run_dir(RunDir(config.model_dir), strategy)
    print(f"Run folder: {config.model_dir}", flush=True)
    if config.init_from:
        fine_tuning.check_compatible(config.init_from, config.model_dir,
                                     {name: getattr(config, name) for name in INHERITED_BY_INIT_FROM})
    record = None
    if config.time_budget:
        config, record = plan_budget(config, run_dir, started, fixed)
    prepare_run_dir(config, run_dir)
    if record:
        budget.save(run_dir, record)
    return config, strategy, run_dir, started


def train(config, verbose="auto", fixed=(), started=None):
    """Runs (or resumes) the training part of the run: `start_run`, then
    `trainer.train` with each section. Returns the `Trained` record."""
    config, strategy, run_dir, started = start_run(config, fixed, started)
    model, tokenizer = trainer.train(config.data, config.model, config.training, config.bleu_validation,
                                     config.decoding, run_dir, strategy, verbose, budget_start=started)
    return Trained(config, model, tokenizer, strategy, time.monotonic() - started,
                   optimization.updates_made(model.optimizer))


def first_cooldown_interval(training, run_dir):
    """The first checkpoint interval that ends inside the learning rate's
    cool-down, where the averaged checkpoints come from; 0 without a
    cool-down (the paper averages the last checkpoints of its whole run)."""
    if not training.cooldown:
        return 0
    if training.time_budget:  # intervals end at shares of training's time
        return int(budget.INTERVALS * (1.0 - training.cooldown))
    return int(training.steps * (1.0 - training.cooldown)) // training.interval


def _print_scores(label, scores):
    print(f"{label:<22s} sacreBLEU {scores['bleu']:6.2f}  chrF {scores['chrf']:6.2f}  "
          f"exact match {scores['exact_match']:5.1f}%")


class PartClock:
    """Times the parts of a command after training, one after the other:
    `with clock.part("choice"): ...`. Under a time budget each part's
    seconds (and the command's so far) go to the run's budget record
    (`budget.record_part`). `trained`: the `time.monotonic()` at which
    training ended."""

    def __init__(self, config, run_dir, trained):
        self.budgeted, self.run_dir, self.trained = bool(config.time_budget), run_dir, trained

    def since_training(self):
        return time.monotonic() - self.trained

    @contextlib.contextmanager
    def part(self, name):
        start = time.monotonic()
        yield
        now = time.monotonic()
        if self.budgeted:
            budget.record_part(self.run_dir, name, now - start, since_training=now - self.trained)


class DecodeTimer:
    """Beam decodes by a `Translator`, timed: `seconds_per_sentence` is the
    last decode's, which prices the time budget's next candidate and alpha
    (`budget.decode_fits`); None before the first. An untimed decode of
    one sentence first traces the search (3-4 s on LibreOffice)."""

    def __init__(self, translator, clock=time.monotonic):
        self.translator, self.clock, self.seconds_per_sentence = translator, clock, None

    def __call__(self, sentences):  # with a progress line on stderr: three candidates can take minutes
        if self.seconds_per_sentence is None:
            self.translator.translate(sentences[:1])
        start = self.clock()
        best = self.translator.translate(sentences).best
        self.seconds_per_sentence = (self.clock() - start) / max(1, len(sentences))
        return best


def choose_trained_model(config, run_dir, model, translate, sentences, references, worth_trying=None):
    """The model choice: the last, averaged and best checkpoints scored on the
    validation `sentences` against `references` with the run's beam search
    by `translate` (a `DecodeTimer` over `model`, which ends with the chosen
    weights: `model_choice.choose_model`; `worth_trying`: its guard).
    Returns the `model_choice.ModelChoice`."""
    translator = translate.translator
    print(f"\nChoosing the model on {len(sentences)} validation sentences (beam {translator.beam_size}, "
          f"alpha {translator.alpha:g}):")
    choice = model_choice.choose_model(run_dir, model, translate, sentences, references, config.average_last,
                                       first_cooldown_interval(config.training, run_dir), worth_trying)
    for name in model_choice.CANDIDATES:
        if name in choice.scores:
            _print_scores(f"  {name}" + (" (chosen)" if name == choice.chosen else ""), choice.scores[name])
    if choice.untried:
        print(f"  {', '.join(choice.untried)} not decoded: the time budget keeps the rest for the test and the export")
    return choice


def choose_length_penalty(config, run_dir, translate, choice, sentences, references, worth_trying=None):
    """The length penalty of the chosen model's beam search, chosen on the
    model choice's validation `sentences` among `model_choice.ALPHAS`
    (`model_choice.choose_alpha`; `choice` was made at the first) with
    `translate`'s (a `DecodeTimer`'s) translator, whose traced search serves
    them all and is left at the chosen one. `worth_trying`: as
    `choose_alpha`'s. Returns (config with that alpha, recorded in the run
    folder for the scripts and the export, and the `ModelChoice` with it)."""
    translator = translate.translator
    print(f"\nChoosing its length penalty on them (alpha {', '.join(f'{a:g}' for a in model_choice.ALPHAS)}):")

    def translate_at(alpha):
        translator.alpha = alpha
        return translate

    choice = model_choice.choose_alpha(run_dir, choice, translate_at, sentences, references,
                                       worth_trying=worth_trying)
    for alpha, scores in choice.alpha_scores.items():
        _print_scores(f"  alpha {alpha}" + (" (chosen)" if float(alpha) == choice.alpha else ""), scores)
    untried = model_choice.ALPHAS[len(choice.alpha_scores):]
    if untried:
        print(f"  alpha {', '.join(f'{a:g}' for a in untried)} not tried: the time budget keeps the rest for the "
              "test and the export")
    translator.alpha = choice.alpha
    config = dataclasses.replace(config, alpha=choice.alpha)
    run_dir.save_config(config)
    return config, choice


def score_on_test(config, run_dir, translator, chosen, examples):
    """The test: the test split translated with beam search and scored with
    sacreBLEU, chrF and exact match (`evaluation.evaluate`), its hypotheses
    written to the run folder, the first `examples` shown. Returns the `Tested` record."""
    sentences, references = sources.read_split(config.data, "test")
    scores = evaluation.evaluate(translator, sentences, references, run_dir.hypotheses_path("test"))
    print(f"\nTest set: {len(sentences)} sentences, {chosen} model")
    print(f"sacreBLEU {scores['bleu']:.2f}  ({scores['bleu_signature']})")
    print(f"chrF      {scores['chrf']:.2f}  ({scores['chrf_signature']})")
    print(f"exact match {scores['exact_match']:.1f}% of sentences")
    print(f"Hypotheses written to {scores['hypotheses_path']}")
    for source, hypothesis, reference in list(zip(sentences, scores["hypotheses"], references))[:examples]:
        print(f"\n  source:    {source}\n  output:    {hypothesis}\n  reference: {reference}")
    return Tested(chosen, len(sentences), **{field.name: scores[field.name] for field in dataclasses.fields(Tested)
                                             if field.name not in ("chosen", "sentences")})


def export(translator, export_dir):
    """The export: `translator` as a SavedModel under `export_dir`. Returns the `Exported` record."""
    path = saved_model.export_translator(translator, export_dir)
    policy = translator.models[0].dtype_policy.name
    print(f"\nSavedModel exported to {path} (computing in {policy})")
    return Exported(path, policy)


def train_and_evaluate(config, examples=5, fixed=(), started=None):
    """The whole command, as its stages: train (`train`: the recipe's
    measure, choice and plan under a time budget, then training), choose
    the model, test it, export it. Returns the `Outcome`. `config` is the
    whole `RunConfig`; each stage gets its section. `fixed`: the settings
    the user gave (the CLI's flags), which a time-budgeted run's recipe
    keeps. `started`: the `time.monotonic()` at which the command began
    (default: now), from which a time budget counts. With a time budget,
    what each part after training took goes to the budget record."""
    started = time.monotonic() if started is None else started
    trained = train(config, fixed=fixed, started=started)
    config, model = trained.config, trained.model
    if not distribution.worker_role(trained.strategy)[0]:  # not the chief
        return Outcome(config, trained.seconds, trained.updates)
    run_dir = RunDir(config.model_dir)
    clock = PartClock(config, run_dir, started + trained.seconds)
    with clock.part("choice"):
        sentences, references = sources.read_split(config.data, "validation", limit=config.bleu_sentences or None)
        choose_alpha = bool(config.time_budget) and "alpha" not in fixed
        first_alpha = model_choice.ALPHAS[0] if choose_alpha else None  # else the run's
        translate = DecodeTimer(make_translator(config.decoding, model, trained.tokenizer, alpha=first_alpha))
        record = budget.load(run_dir) if config.time_budget else None

        def fits(growth=1.0):
            return budget.decode_fits(record, clock.since_training(), translate.seconds_per_sentence,
                                      len(sentences), growth)

        choice = choose_trained_model(config, run_dir, model, translate, sentences, references,
                                      worth_trying=fits if record is not None else None)
        if choose_alpha:
            config, choice = choose_length_penalty(config, run_dir, translate, choice, sentences, references,
                                                   worth_trying=lambda: fits(budget.ALPHA_STEP_COST))
        translator = translate.translator
    with clock.part("test"):
        tested = score_on_test(config, run_dir, translator, choice.chosen, examples)
    exported = None
    if config.export_dir:
        with clock.part("export"):
            exported = export(translator, config.export_dir)
    outcome = Outcome(config, trained.seconds, trained.updates, choice, tested, exported,
                      time.monotonic() - started)
    print(f"Done in {outcome.total_seconds / 60:.1f} minutes.")
    if config.time_budget:
        print(budget.describe(budget.load(run_dir)), flush=True)
    return outcome
