"""Run settings: one frozen dataclass per component, and the flat `RunConfig` made from them.

Each setting is written once, in the section of the component that uses it
(fairseq's `save_checkpoint(cfg.checkpoint, ...)` habit), with its default
and the help text of its flag:

- `DataSettings`: where pairs come from and how they are cut;
- `ModelSettings`: the preset, its dropout and norm placement, and the precision;
- `TrainingSettings`: the optimisation and checkpointing;
- `ValidationSettings`: BLEU while training;
- `DecodingSettings`: beam search for test, export and scripts.

`RunConfig` is written out below: one flat field per setting, which is
both a flag of scripts/train.py and a key of a run folder's
`run_config.json`, so the command line and the file stay flat and old files
keep loading. Each of its fields takes its default and help from the
section's (`flag_of`). A section field may name another flat field instead
of being its own (`shared_with`: the seed, and the maximum input length,
serve two sections) or go by another flat name (`flag`). Only the CLI and the
end-to-end recipe (`training.recipe`) read the whole `RunConfig`; each
component receives its section (`config.data`, `config.training`, ...).

This module imports nothing else of the package: the layers above it
(modeling, data, training, ...) read it, never the other way round.
"""

import dataclasses
import re

# The paper's numbers (Vaswani et al., 2017), each defined here once: the
# defaults of the settings below and of the library's functions.
PAPER_BEAM_SIZE = 4  # section 6.1
PAPER_ALPHA = 0.6  # section 6.1: the length penalty of Wu et al. (2016)
PAPER_EXTRA_LENGTH = 50  # section 6.1: outputs of at most input length + 50
PAPER_WARMUP_STEPS = 4000  # section 5.3
PAPER_LABEL_SMOOTHING = 0.1  # section 5.4
PAPER_BATCH_TOKENS = 25000  # section 5.1: about 25,000 source and 25,000 target tokens per batch
# Tokens per side in one global batch: the paper's scaled to a 2-core CPU,
# where it keeps an update under about 1.5 s for the small preset.
BATCH_TOKENS = 4096

# A local corpus without --validation or --test gives each this many pairs,
# and at most this share of its pairs (`data.local_corpus`).
HELD_OUT = 1000
MAX_HELD_OUT_FRACTION = 0.025

# tf.distribute strategies by flag value (built by training.distribution.make_strategy).
STRATEGIES = ("default", "mirrored", "multi_worker", "tpu")
# A run in a model directory can only be resumed with these unchanged.
# A fine-tuning run (--init-from) takes these from the run it starts from: they fix the weights' shapes.
INHERITED_BY_INIT_FROM = ("preset", "norm_first", "vocab_size", "encoder_layers", "decoder_layers")
RESUME_MUST_MATCH = ("dataset", "source_lang", "target_lang", "vocab_size", "preset", "norm_first", "encoder_layers",
                     "decoder_layers", "validation", "test", "init_from", "time_budget")


def setting(default, help, *, flag=None, shared_with=None):
    """A section field: its default and the --help of its flag. `flag`: its flat
    name when it differs from the field's; `shared_with`: the flat field it
    takes its value from (it is then no flag of its own)."""
    metadata = {"help": help, "flag": flag, "shared_with": shared_with}
    return dataclasses.field(default=default, metadata=metadata)


def parse_minutes(text):
    """Minutes in a --time-budget: `25`, `25m`, `90min`, `1.5h` or `45s`; ValueError otherwise."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(h|m|min|s)?\s*", str(text))
    if not match:
        raise ValueError(f"--time-budget {text!r} is not a duration; expected minutes (25), or 90m, 1.5h, 45s.")
    value = float(match.group(1)) * {"h": 60.0, "m": 1.0, "min": 1.0, "s": 1 / 60.0, None: 1.0}[match.group(2)]
    if value <= 0:
        raise ValueError(f"--time-budget {text!r} must be positive.")
    return value


def _at_least(section, minimum, *names):
    for name in names:
        if int(getattr(section, name)) < minimum:
            raise ValueError(f"{name} must be at least {minimum}; got {getattr(section, name)}.")


def check_guards(no_repeat_ngram_size=0, repetition_penalty=1.0):
    """ValueError naming the first decoding guard setting outside its valid
    range (`decoding.guards`; checked here so that a bad flag fails before training)."""
    if int(no_repeat_ngram_size) != no_repeat_ngram_size or no_repeat_ngram_size < 0:
        raise ValueError(f"no_repeat_ngram_size must be a whole number >= 0 (0: off); got {no_repeat_ngram_size}.")
    if not repetition_penalty > 0:
        raise ValueError(f"repetition_penalty must be > 0 (1: off); got {repetition_penalty}.")


def _check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(f"Unknown {name} {value!r}; expected one of {list(choices)}.")


@dataclasses.dataclass(frozen=True)
class DataSettings:
    """Where a run's sentence pairs come from and how they are cut (see `data.sources`)."""

    dataset: str = setting("numerals_en_de", "Data: a tfds name, PATH.tsv, or SOURCE_PATH,TARGET_PATH.")
    source_lang: str | None = setting(
        None, "Source language key of a tfds translation dataset, e.g. en (default: its first supervised key).")
    target_lang: str | None = setting(
        None, "Target language key of a tfds translation dataset, e.g. de (default: its second supervised key).")
    data_dir: str | None = setting(None, "Where tfds keeps prepared datasets (default: ~/tensorflow_datasets).")
    validation: str | None = setting(
        None, "Held-out validation pairs, PATH.tsv or SOURCE_PATH,TARGET_PATH (default: the dataset's validation "
        f"split; for a local corpus, {HELD_OUT:,} pairs (at most {MAX_HELD_OUT_FRACTION * 100:g}%%) drawn at "
        "random from the whole file). Training pairs equal to a validation pair are removed from training.")
    test: str | None = setting(
        None, "Held-out test pairs, as --validation (default: the dataset's test split, or another "
        f"{HELD_OUT:,} pairs drawn from a local corpus, disjoint from validation).")
    vocab_size: int = setting(1000, "Shared SentencePiece vocabulary size (the paper: 37000 for WMT14 En-De).")
    max_length: int = setting(64, "Pairs longer than this many pieces (either side) are left out of training.")
    batch_tokens: int = setting(
        BATCH_TOKENS, f"Tokens per side in one global batch, padding included (the paper: ~{PAPER_BATCH_TOKENS}).")
    seed: int = setting(0, "Seed of weights initialisation and data shuffling.")

    def __post_init__(self):
        _at_least(self, 1, "vocab_size", "max_length", "batch_tokens")


@dataclasses.dataclass(frozen=True)
class ModelSettings:
    """Which Transformer a run builds, and the Keras dtype policy it computes in.

    `precision` is "auto" only in a run's flags; the trainer resolves it on
    the machine that trains and records the policy it used, so that a
    restored run computes as it trained (`decoding.restore`).
    """

    preset: str = setting("small", "Model preset: tiny (tests), small (CPU), base or big (paper, Table 3).")
    dropout: float | None = setting(
        None, "Residual dropout P_drop, on every sub-layer output and on the embeddings (default: the preset's; "
        "the paper: 0.1 base, 0.3 big).")
    norm_first: bool | None = setting(
        None, "Pre-norm residual blocks: LayerNorm before each sub-layer and after each stack, instead of the "
        "paper's post-norm after each residual sum. Neither flag: the preset's post-norm, or under --time-budget "
        "the recipe's choice (pre-norm for a short run of the tiny or small preset, where it learns faster; its "
        "'recipe:' block says why).")
    encoder_layers: int | None = setting(
        None, "Encoder layers (default: the preset's N; the paper: 6). A deep encoder costs once per sentence.")
    decoder_layers: int | None = setting(
        None, "Decoder layers (default: the preset's N; the paper: 6). Beam search runs the decoder at every "
        "output step, so a shallow decoder translates faster (Kasai et al., 2021: 12 encoder and 1 decoder layers).")
    precision: str = setting(
        "auto", "Keras dtype policy: float32, mixed_bfloat16, mixed_float16 (with dynamic loss scaling), or auto: "
        "mixed_bfloat16 where the hardware computes bfloat16 natively (AVX512_BF16/AMX CPUs, GPUs of compute "
        "capability 8.0+), else float32.")

    def __post_init__(self):
        if self.dropout is not None and not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1); got {self.dropout}.")
        for name in ("encoder_layers", "decoder_layers"):
            if getattr(self, name) is not None:
                _at_least(self, 1, name)

    def overrides(self):
        """The `Transformer` arguments these settings change from the preset's (None: the preset's)."""
        return {"dropout": self.dropout, "norm_first": self.norm_first,
                "num_encoder_layers": self.encoder_layers, "num_decoder_layers": self.decoder_layers}


@dataclasses.dataclass(frozen=True)
class TrainingSettings:
    """The optimisation and checkpointing of `training.trainer.train`."""

    strategy: str = setting(
        "default", "tf.distribute strategy: default (one device), mirrored (all local GPUs), multi_worker (reads "
        "TF_CONFIG), tpu.")
    steps: int = setting(
        800, "Optimizer updates to run in total (the paper: 100000 for base, 300000 for big). Not with "
        "--time-budget, whose clock ends training.")
    time_budget: str | None = setting(
        None, "Spend this long on the whole command: minutes (25), or 90m, 1.5h. The run chooses what you did not "
        "set (model, vocabulary, dropout, ...) from the corpus' size and what this machine makes of the budget, "
        "and prints a 'recipe:' block saying why. Training gets the time the rest leaves: the learning rate "
        "follows training's clock to zero when that time is spent, with a checkpoint at every sixth of it. The "
        "budget covers everything from the process's start: training, validation, the model choice, the test and "
        "the export, the last three priced from the run's own timing of its beam search. A run started again "
        "continues its budget.")
    grad_accum: int = setting(1, "Accumulate gradients over this many batches per update.")
    jit_compile: bool = setting(False, "Compile the train step with XLA.")
    warmup_steps: int = setting(
        400, f"Warm-up steps of the learning-rate schedule (the paper: {PAPER_WARMUP_STEPS}; the default suits the "
        "short built-in run).")
    learning_rate_scale: float = setting(1.0, "Multiplies the schedule (the paper: 1.0).")
    label_smoothing: float = setting(
        PAPER_LABEL_SMOOTHING, f"Label smoothing epsilon (the paper: {PAPER_LABEL_SMOOTHING}).")
    cooldown: float = setting(
        0.5, "Fraction of the run, at its end, over which the learning rate falls linearly to zero (0: none, the "
        "paper's inverse square root to the last update; the default suits the short built-in run; under "
        "--time-budget a share of training's time, printed in its 'recipe:' block).")
    checkpoint_every: int = setting(
        200, "Updates between checkpoints (and validation runs and backups). Not with --time-budget, which places "
        "a checkpoint at every sixth of training's time.")
    keep_checkpoints: int = setting(5, "Checkpoints kept on disk; the paper averages the last 5 (base) or 20 (big).")
    average_last: int = setting(
        5, "At the end, average the last this many kept checkpoints (the paper: 5 for base, 20 for big); the last, "
        "the averaged and the best (by val_bleu) checkpoints are scored on the validation set, and the best of "
        "the three is tested and exported.")
    seed: int = setting(0, "", shared_with="seed")
    init_from: str | None = setting(
        None, "Fine-tune: start from the weights and the SentencePiece vocabulary of this trained run (a model "
        "directory). Its preset and vocabulary are used; the optimizer starts fresh.")

    def __post_init__(self):
        _check_choice("strategy", self.strategy, STRATEGIES)
        _at_least(self, 1, "steps", "grad_accum", "checkpoint_every", "keep_checkpoints", "warmup_steps",
                  "average_last")
        if not 0.0 <= self.cooldown <= 1.0:
            raise ValueError(f"cooldown must be a fraction of the run in [0, 1]; got {self.cooldown}.")
        if self.time_budget is not None:
            parse_minutes(self.time_budget)
            if self.cooldown <= 0:
                raise ValueError("--time-budget needs a cool-down (--cooldown > 0): the learning rate ends at zero "
                                 "when the budget is spent.")
        if self.average_last > self.keep_checkpoints:
            raise ValueError(f"average_last ({self.average_last}) cannot exceed keep_checkpoints "
                             f"({self.keep_checkpoints}): only kept checkpoints can be averaged.")

    @property
    def interval(self):
        """Updates in one checkpoint interval (one Keras epoch)."""
        return min(self.checkpoint_every, self.steps)


@dataclasses.dataclass(frozen=True)
class ValidationSettings:
    """BLEU on validation sentences after every checkpoint interval (`training.bleu_validation`)."""

    bleu_sentences: int = setting(
        500, "After every checkpoint interval, translate this many validation sentences and log sacreBLEU and chrF "
        "as val_bleu and val_chrf (0: off).")
    bleu_beam_size: int = setting(1, "Beam size of that validation decoding (1: greedy, the fastest).")
    early_stopping: int = setting(
        0, "Stop after this many checkpoint intervals without a better val_bleu (0: never).")

    def __post_init__(self):
        _at_least(self, 0, "bleu_sentences", "early_stopping")
        _at_least(self, 1, "bleu_beam_size")
        if self.early_stopping and not self.bleu_sentences:
            raise ValueError("early_stopping needs val_bleu; set bleu_sentences above 0.")


@dataclasses.dataclass(frozen=True)
class DecodingSettings:
    """Beam search as the test split, the export and the scripts run it (`decoding.Translator`)."""

    beam_size: int = setting(PAPER_BEAM_SIZE, f"Beam size for evaluation and export (the paper: {PAPER_BEAM_SIZE}).")
    alpha: float = setting(PAPER_ALPHA, f"Length penalty exponent of beam search (the paper: {PAPER_ALPHA}). Under "
                           "--time-budget, unless given, chosen after training on the validation sentences, as the "
                           "paper chose its own on its dev set (training/model_choice.py), and recorded in the run.")
    max_input_length: int = setting(64, "", shared_with="max_length")
    extra_length: int = setting(
        PAPER_EXTRA_LENGTH, f"Outputs may be at most input length + this many pieces (the paper: "
        f"{PAPER_EXTRA_LENGTH}).", flag="max_output_extra")
    no_repeat_ngram_size: int = setting(
        0, "Decoding guard: no output repeats an n-gram of this many pieces (CTranslate2's no_repeat_ngram_size; "
        "0: off).")
    repetition_penalty: float = setting(
        1.0, "Decoding guard: the logits of pieces already in the output are divided by this if positive, "
        "multiplied if negative (CTRL's penalty, CTranslate2's repetition_penalty; 1: off).")

    def __post_init__(self):
        _at_least(self, 1, "beam_size")
        check_guards(self.no_repeat_ngram_size, self.repetition_penalty)


# RunConfig attribute -> section class, in the order of the flags.
SECTIONS = {"data": DataSettings, "model": ModelSettings, "training": TrainingSettings,
            "bleu_validation": ValidationSettings, "decoding": DecodingSettings}


def flat_name(field):
    """The RunConfig field (flag, run_config.json key) of a section field."""
    return field.metadata.get("shared_with") or field.metadata.get("flag") or field.name


def flag_of(section, name):
    """A RunConfig field for the setting `name` of `section`, with the default
    and help text defined there."""
    field = section.__dataclass_fields__[name]
    return setting(field.default, field.metadata["help"])


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Everything a training run needs, flat: every field is a flag of
    scripts/train.py and a key of run_config.json.

    Each field is a setting of one section above, whose default and help it
    takes (`flag_of`); tests/test_config.py checks that the fields are the
    sections' settings, each once, with the sections' types. Two settings
    serve two sections: `seed` and `max_length` (the decoding's
    `max_input_length`); `max_output_extra` is the decoding's `extra_length`.

    The defaults are the main job: the small preset on the built-in corpus,
    sized to reach sacreBLEU >= 90 within 15 minutes on a 2-core CPU. The
    library's own defaults (TransformerSchedule, LabelSmoothedCrossEntropy,
    the presets, beam search) are the paper's; the README's WMT command
    passes the paper's run settings explicitly. `model_dir` and `export_dir`
    of None are the recipe's default folders (`training.recipe.with_default_folders`).
    """

    # DataSettings
    dataset: str = flag_of(DataSettings, "dataset")
    source_lang: str | None = flag_of(DataSettings, "source_lang")
    target_lang: str | None = flag_of(DataSettings, "target_lang")
    data_dir: str | None = flag_of(DataSettings, "data_dir")
    validation: str | None = flag_of(DataSettings, "validation")
    test: str | None = flag_of(DataSettings, "test")
    vocab_size: int = flag_of(DataSettings, "vocab_size")
    max_length: int = flag_of(DataSettings, "max_length")  # also DecodingSettings.max_input_length
    batch_tokens: int = flag_of(DataSettings, "batch_tokens")
    seed: int = flag_of(DataSettings, "seed")  # also TrainingSettings.seed
    # ModelSettings
    preset: str = flag_of(ModelSettings, "preset")
    dropout: float | None = flag_of(ModelSettings, "dropout")
    norm_first: bool | None = flag_of(ModelSettings, "norm_first")
    encoder_layers: int | None = flag_of(ModelSettings, "encoder_layers")
    decoder_layers: int | None = flag_of(ModelSettings, "decoder_layers")
    precision: str = flag_of(ModelSettings, "precision")
    # TrainingSettings
    strategy: str = flag_of(TrainingSettings, "strategy")
    steps: int = flag_of(TrainingSettings, "steps")
    time_budget: str | None = flag_of(TrainingSettings, "time_budget")
    grad_accum: int = flag_of(TrainingSettings, "grad_accum")
    jit_compile: bool = flag_of(TrainingSettings, "jit_compile")
    warmup_steps: int = flag_of(TrainingSettings, "warmup_steps")
    learning_rate_scale: float = flag_of(TrainingSettings, "learning_rate_scale")
    label_smoothing: float = flag_of(TrainingSettings, "label_smoothing")
    cooldown: float = flag_of(TrainingSettings, "cooldown")
    checkpoint_every: int = flag_of(TrainingSettings, "checkpoint_every")
    keep_checkpoints: int = flag_of(TrainingSettings, "keep_checkpoints")
    average_last: int = flag_of(TrainingSettings, "average_last")
    init_from: str | None = flag_of(TrainingSettings, "init_from")
    # ValidationSettings
    bleu_sentences: int = flag_of(ValidationSettings, "bleu_sentences")
    bleu_beam_size: int = flag_of(ValidationSettings, "bleu_beam_size")
    early_stopping: int = flag_of(ValidationSettings, "early_stopping")
    # DecodingSettings
    beam_size: int = flag_of(DecodingSettings, "beam_size")
    alpha: float = flag_of(DecodingSettings, "alpha")
    max_output_extra: int = flag_of(DecodingSettings, "extra_length")
    no_repeat_ngram_size: int = flag_of(DecodingSettings, "no_repeat_ngram_size")
    repetition_penalty: float = flag_of(DecodingSettings, "repetition_penalty")
    # The recipe's own: where the run folder and the export go.
    model_dir: str | None = setting(
        None, "Checkpoints, the backup for resuming, TensorBoard logs, the vocabulary and run_config.json go here "
        "(default: runs/<dataset>-<preset>, e.g. runs/numerals_en_de-small).")
    export_dir: str | None = setting(
        None, "Export a SavedModel to <export_dir>/<version>/ at the end (default: saved_models/<dataset>, e.g. "
        "saved_models/numerals_en_de; empty: no export).")

    def __post_init__(self):
        for name in SECTIONS:
            getattr(self, name)  # each section checks its own values

    def section(self, name):
        """The section `name` (a key of SECTIONS) filled from the flat fields."""
        cls = SECTIONS[name]
        return cls(**{field.name: getattr(self, flat_name(field)) for field in dataclasses.fields(cls)})

    @property
    def data(self) -> DataSettings:
        return self.section("data")

    @property
    def model(self) -> ModelSettings:
        return self.section("model")

    @property
    def training(self) -> TrainingSettings:
        return self.section("training")

    @property
    def bleu_validation(self) -> ValidationSettings:
        return self.section("bleu_validation")

    @property
    def decoding(self) -> DecodingSettings:
        return self.section("decoding")

    def check_resumes(self, previous, names=RESUME_MUST_MATCH):
        """Raises ValueError if this run cannot continue `previous` (the run
        already in the model directory): it names the settings that differ
        among `names`, those that fix the data, the vocabulary, the weights'
        shapes and the time budget."""
        changed = [f"--{name.replace('_', '-')} {getattr(previous, name)!r} -> {getattr(self, name)!r}"
                   for name in names if getattr(previous, name) != getattr(self, name)]
        if changed:
            raise ValueError(
                f"{self.model_dir!r} holds a run with other settings ({'; '.join(changed)}); "
                "pass another --model-dir, or delete that folder to start over."
            )

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values, source="run_config.json"):
        """A RunConfig from saved values. Keys this version does not know (a
        run written by a newer version) are an error naming them: loading
        without them would silently change the run's settings."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"{source} has settings this version of keras_transformer does not know: {unknown}; "
                             "it was written by a newer version. Upgrade keras_transformer to use this run.")
        return cls(**values)
