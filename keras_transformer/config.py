"""Run settings: one frozen dataclass per component, and the flat `RunConfig` made from them.

Each setting is written once, in the section of the component that uses it
(fairseq's `save_checkpoint(cfg.checkpoint, ...)` habit), with its default
and the help text of its flag:

- `DataSettings`: where pairs come from and how they are cut;
- `ModelSettings`: the preset, its dropout and norm placement, and the precision;
- `TrainingSettings`: the optimisation and checkpointing;
- `ValidationSettings`: BLEU while training;
- `DecodingSettings`: beam search for test, export and scripts.

`RunConfig` is generated from the sections: one flat field per setting,
which is both a flag of scripts/train.py and a key of a run folder's
`run_config.json`, so the command line and the file stay flat and old files
keep loading. A section field may name another flat field instead of being
its own (`shared_with`: the seed, and the maximum input length, serve two
sections) or go by another flat name (`flag`). Only the CLI and the
end-to-end recipe (`training.recipe`) read the whole `RunConfig`; each
component receives its section (`config.data`, `config.training`, ...).

This module imports nothing else of the package: the layers above it
(modeling, data, training, ...) read it, never the other way round.
"""

import dataclasses
import re
import typing

# tf.distribute strategies by flag value (built by training.distribution.make_strategy).
STRATEGIES = ("default", "mirrored", "multi_worker", "tpu")
# A run in a model directory can only be resumed with these unchanged.
# A fine-tuning run (--init-from) takes these from the run it starts from: they fix the weights' shapes.
INHERITED_BY_INIT_FROM = ("preset", "norm_first", "vocab_size")
RESUME_MUST_MATCH = ("dataset", "source_lang", "target_lang", "vocab_size", "preset", "norm_first", "validation",
                     "test", "init_from", "time_budget")


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
        "split; for a local corpus, 1,000 pairs (at most 2.5%%) drawn at random from the whole file). Training "
        "pairs equal to a validation pair are removed from training.")
    test: str | None = setting(
        None, "Held-out test pairs, as --validation (default: the dataset's test split, or another 1,000 pairs "
        "drawn from a local corpus, disjoint from validation).")
    vocab_size: int = setting(1000, "Shared SentencePiece vocabulary size (the paper: 37000 for WMT14 En-De).")
    max_length: int = setting(64, "Pairs longer than this many pieces (either side) are left out of training.")
    batch_tokens: int = setting(4096, "Tokens per side in one global batch, padding included (the paper: ~25000).")
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
        "the recipe's choice (pre-norm for runs of fewer than 10,000 updates, where it trains faster).")
    precision: str = setting(
        "auto", "Keras dtype policy: float32, mixed_bfloat16, mixed_float16 (with dynamic loss scaling), or auto: "
        "mixed_bfloat16 where the hardware computes bfloat16 natively (AVX512_BF16/AMX CPUs, GPUs of compute "
        "capability 8.0+), else float32.")

    def __post_init__(self):
        if self.dropout is not None and not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1); got {self.dropout}.")


@dataclasses.dataclass(frozen=True)
class TrainingSettings:
    """The optimisation and checkpointing of `training.trainer.train`."""

    strategy: str = setting(
        "default", "tf.distribute strategy: default (one device), mirrored (all local GPUs), multi_worker (reads "
        "TF_CONFIG), tpu.")
    steps: int = setting(
        800, "Optimizer updates to run in total (the paper: 100000 for base, 300000 for big). With --time-budget "
        "the budget wins: the run plans its own updates and ignores this flag.")
    time_budget: str | None = setting(
        None, "Spend this long on the whole command: minutes (25), or 90m, 1.5h. The run measures this machine, "
        "plans its updates, checkpoint interval and warm-up, ends its learning rate at zero when training's "
        "share is spent, and chooses what you did not set (model, vocabulary, dropout, ...) from the corpus' "
        "size and the budget; it prints a 'recipe:' block saying why. The budget covers everything from the "
        "process's start: training, validation, the model choice, the test and the export, the last three "
        "priced from the run's own validation decode. A run started again continues its budget.")
    grad_accum: int = setting(1, "Accumulate gradients over this many batches per update.")
    jit_compile: bool = setting(False, "Compile the train step with XLA.")
    warmup_steps: int = setting(
        400, "Warm-up steps of the learning-rate schedule (the paper: 4000; the default suits the short built-in "
        "run).")
    learning_rate_scale: float = setting(1.0, "Multiplies the schedule (the paper: 1.0).")
    label_smoothing: float = setting(0.1, "Label smoothing epsilon (the paper: 0.1).")
    cooldown: float = setting(
        0.5, "Fraction of the run, at its end, over which the learning rate falls linearly to zero (0: none, the "
        "paper's inverse square root to the last update; the default suits the short built-in run; under "
        "--time-budget the recipe sets 0.2).")
    checkpoint_every: int = setting(200, "Updates between checkpoints (and validation runs and backups).")
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

    beam_size: int = setting(4, "Beam size for evaluation and export (the paper: 4).")
    alpha: float = setting(0.6, "Length penalty exponent of beam search (the paper: 0.6).")
    max_input_length: int = setting(64, "", shared_with="max_length")
    extra_length: int = setting(
        50, "Outputs may be at most input length + this many pieces (the paper: 50).", flag="max_output_extra")
    no_repeat_ngram_size: int = setting(
        0, "Decoding guard: no output repeats an n-gram of this many pieces (CTranslate2's no_repeat_ngram_size; "
        "0: off).")
    repetition_penalty: float = setting(
        1.0, "Decoding guard: the logits of pieces already in the output are divided by this if positive, "
        "multiplied if negative (CTRL's penalty, CTranslate2's repetition_penalty; 1: off).")

    def __post_init__(self):
        _at_least(self, 1, "beam_size")
        _at_least(self, 0, "no_repeat_ngram_size")
        if not self.repetition_penalty > 0:
            raise ValueError(f"repetition_penalty must be > 0 (1: off); got {self.repetition_penalty}.")


# RunConfig attribute -> section class, in the order of the flags.
SECTIONS = {"data": DataSettings, "model": ModelSettings, "training": TrainingSettings,
            "bleu_validation": ValidationSettings, "decoding": DecodingSettings}
# The recipe's own fields: where the run folder and the export go.
_FOLDERS = [
    ("model_dir", str | None, setting(
        None, "Checkpoints, the backup for resuming, TensorBoard logs, the vocabulary and run_config.json go here "
        "(default: runs/<dataset>-<preset>, e.g. runs/numerals_en_de-small).")),
    ("export_dir", str | None, setting(
        None, "Export a SavedModel to <export_dir>/<version>/ at the end (default: saved_models/<dataset>, e.g. "
        "saved_models/numerals_en_de; empty: no export).")),
]


def _flat_name(field):
    return field.metadata.get("shared_with") or field.metadata.get("flag") or field.name


def _flat_fields():
    """(name, type, field) of every flat RunConfig field, each setting once."""
    fields = []
    for cls in SECTIONS.values():
        hints = typing.get_type_hints(cls)
        for field in dataclasses.fields(cls):
            if field.metadata.get("shared_with"):
                continue
            copy = setting(field.default, field.metadata["help"])
            fields.append((_flat_name(field), hints[field.name], copy))
    return fields + _FOLDERS


class _RunConfigMethods:
    """What `RunConfig` adds to its generated fields."""

    def __post_init__(self):
        for name in SECTIONS:
            getattr(self, name)  # each section checks its own values

    def section(self, name):
        """The section `name` (a key of SECTIONS) filled from the flat fields."""
        cls = SECTIONS[name]
        return cls(**{field.name: getattr(self, _flat_name(field)) for field in dataclasses.fields(cls)})

    data = property(lambda self: self.section("data"))
    model = property(lambda self: self.section("model"))
    training = property(lambda self: self.section("training"))
    bleu_validation = property(lambda self: self.section("bleu_validation"))
    decoding = property(lambda self: self.section("decoding"))

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


RunConfig = dataclasses.make_dataclass("RunConfig", _flat_fields(), bases=(_RunConfigMethods,), frozen=True)
RunConfig.__module__ = __name__
RunConfig.__doc__ = """Everything a training run needs, flat: every field is a flag of scripts/train.py
and a key of run_config.json, generated from the sections above.

The defaults are the main job: the small preset on the built-in corpus,
sized to reach sacreBLEU >= 90 within 15 minutes on a 2-core CPU. The
library's own defaults (TransformerSchedule, LabelSmoothedCrossEntropy,
the presets, beam search) are the paper's; the README's WMT command
passes the paper's run settings explicitly. `model_dir` and `export_dir`
of None are the recipe's default folders (`training.recipe.with_default_folders`).
"""
