"""Run settings: one flat, frozen `RunConfig` (the flags of scripts/train.py and
the `run_config.json` of a run folder), read by components in sections.

The command line and the JSON file stay flat. Each component receives only
the section it uses (fairseq's `save_checkpoint(cfg.checkpoint, ...)`
habit):

- `config.data`: `DataSettings`, where pairs come from and how they are cut;
- `config.model`: `ModelSettings`, the preset, its dropout and the precision;
- `config.training`: `TrainingSettings`, the optimisation and checkpointing;
- `config.bleu_validation`: `ValidationSettings`, BLEU while training;
- `config.decoding`: `DecodingSettings`, beam search for test, export and scripts.

Only the CLI and the end-to-end recipe (`training.recipe`) read the whole
`RunConfig`. Where the file lives and what else a run folder holds is
`run_dir.RunDir`'s business.
"""

import dataclasses
import os
import re

from keras_transformer.modeling import presets
from keras_transformer.modeling.precision import PRECISIONS

# tf.distribute strategies by flag value (built by training.distribution.make_strategy).
STRATEGIES = ("default", "mirrored", "multi_worker", "tpu")
# A run in a model directory can only be resumed with these unchanged.
# A fine-tuning run (--init-from) takes these from the run it starts from: they fix the weights' shapes.
INHERITED_BY_INIT_FROM = ("preset", "vocab_size")
RESUME_MUST_MATCH = ("dataset", "source_lang", "target_lang", "vocab_size", "preset", "validation", "test",
                     "init_from")


def is_local_dataset(spec):
    """True for `PATH.tsv`, `SOURCE_PATH,TARGET_PATH` or an existing file; else a tfds name."""
    return spec.endswith(".tsv") or "," in spec or os.path.exists(spec)


def dataset_slug(spec):
    """A folder name for a dataset spec: `wmt14_translate/de-en` ->
    `wmt14_translate_de-en`, `data/corpus.tsv` -> `corpus`, `a.en,a.de` -> `a`."""
    if is_local_dataset(spec):
        spec = os.path.splitext(os.path.basename(spec.split(",")[0]))[0]
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", spec).strip("_.") or "dataset"


@dataclasses.dataclass(frozen=True)
class DataSettings:
    """Where a run's sentence pairs come from and how they are cut (see `data.sources`)."""

    dataset: str
    source_lang: str | None = None
    target_lang: str | None = None
    data_dir: str | None = None
    validation: str | None = None
    test: str | None = None
    vocab_size: int = 1000
    max_length: int = 64
    batch_tokens: int = 4096
    seed: int = 0


@dataclasses.dataclass(frozen=True)
class ModelSettings:
    """Which Transformer a run builds, and the Keras dtype policy it computes in.

    `precision` is "auto" only in a run's flags; the trainer resolves it on
    the machine that trains and records the policy it used, so that a
    restored run computes as it trained (`decoding.restore`).
    """

    preset: str = "small"
    dropout: float | None = None
    precision: str = "auto"


@dataclasses.dataclass(frozen=True)
class TrainingSettings:
    """The optimisation and checkpointing of `training.trainer.train`."""

    strategy: str = "default"
    steps: int = 800
    grad_accum: int = 1
    jit_compile: bool = False
    warmup_steps: int = 400
    learning_rate_scale: float = 1.0
    label_smoothing: float = 0.1
    cooldown: float = 0.5
    checkpoint_every: int = 200
    keep_checkpoints: int = 5
    average_last: int = 5
    seed: int = 0
    init_from: str | None = None

    @property
    def interval(self):
        """Updates in one checkpoint interval (one Keras epoch)."""
        return min(self.checkpoint_every, self.steps)


@dataclasses.dataclass(frozen=True)
class ValidationSettings:
    """BLEU on validation sentences after every checkpoint interval (`training.bleu_validation`)."""

    bleu_sentences: int = 500
    bleu_beam_size: int = 1
    early_stopping: int = 0


@dataclasses.dataclass(frozen=True)
class DecodingSettings:
    """Beam search as the test split, the export and the scripts run it (`decoding.Translator`)."""

    beam_size: int = 4
    alpha: float = 0.6
    max_input_length: int = 64
    extra_length: int = 50


def _section(cls, config, **renamed):
    """`cls` filled from the same-named fields of `config`, plus `renamed` values."""
    names = {f.name for f in dataclasses.fields(cls)} - set(renamed)
    return cls(**{name: getattr(config, name) for name in names}, **renamed)


def _field(default, help):
    """A dataclass field whose help text is also the --help of its flag."""
    return dataclasses.field(default=default, metadata={"help": help})


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Everything a training run needs; every field is a flag of scripts/train.py.

    The defaults are the main job: the small preset on the built-in corpus,
    sized to reach sacreBLEU >= 90 within 15 minutes on a 2-core CPU. The
    library's own defaults (TransformerSchedule, LabelSmoothedCrossEntropy,
    the presets, beam search) are the paper's; the README's WMT command
    passes the paper's run settings explicitly.
    """

    dataset: str = _field("numerals_en_de", 'Data: a tfds name, PATH.tsv, or SOURCE_PATH,TARGET_PATH.')
    source_lang: str | None = _field(None, 'Source language key of a tfds translation dataset, e.g. en (default: its first supervised key).')
    target_lang: str | None = _field(None, 'Target language key of a tfds translation dataset, e.g. de (default: its second supervised key).')
    data_dir: str | None = _field(None, 'Where tfds keeps prepared datasets (default: ~/tensorflow_datasets).')
    validation: str | None = _field(None, 'Held-out validation pairs, PATH.tsv or SOURCE_PATH,TARGET_PATH (default: the dataset\'s validation split; for a local corpus, 1,000 pairs (at most 2.5%%) drawn at random from the whole file). Training pairs equal to a validation pair are removed from training.')
    test: str | None = _field(None, 'Held-out test pairs, as --validation (default: the dataset\'s test split, or another 1,000 pairs drawn from a local corpus, disjoint from validation).')
    vocab_size: int = _field(1000, 'Shared SentencePiece vocabulary size (the paper: 37000 for WMT14 En-De).')
    max_length: int = _field(64, 'Pairs longer than this many pieces (either side) are left out of training.')

    preset: str = _field("small", 'Model preset: tiny (tests), small (CPU), base or big (paper, Table 3).')

    strategy: str = _field("default", 'tf.distribute strategy: default (one device), mirrored (all local GPUs), multi_worker (reads TF_CONFIG), tpu.')
    steps: int = _field(800, 'Optimizer updates to run in total (the paper: 100000 for base, 300000 for big).')
    batch_tokens: int = _field(4096, 'Tokens per side in one global batch, padding included (the paper: ~25000).')
    grad_accum: int = _field(1, 'Accumulate gradients over this many batches per update.')
    precision: str = _field("auto", 'Keras dtype policy: float32, mixed_bfloat16, mixed_float16 (with dynamic loss scaling), or auto: mixed_bfloat16 where the hardware computes bfloat16 natively (AVX512_BF16/AMX CPUs, GPUs of compute capability 8.0+), else float32.')
    jit_compile: bool = _field(False, 'Compile the train step with XLA.')
    warmup_steps: int = _field(400, 'Warm-up steps of the learning-rate schedule (the paper: 4000; the default suits the short built-in run).')
    learning_rate_scale: float = _field(1.0, 'Multiplies the schedule (the paper: 1.0).')
    label_smoothing: float = _field(0.1, 'Label smoothing epsilon (the paper: 0.1).')
    cooldown: float = _field(0.5, 'Fraction of the run, at its end, over which the learning rate falls linearly to zero (0: none, the paper\'s inverse square root to the last update; the default suits the short built-in run).')
    dropout: float | None = _field(None, 'Residual dropout P_drop, on every sub-layer output and on the embeddings (default: the preset\'s; the paper: 0.1 base, 0.3 big).')
    checkpoint_every: int = _field(200, 'Updates between checkpoints (and validation runs and backups).')
    keep_checkpoints: int = _field(5, 'Checkpoints kept on disk; the paper averages the last 5 (base) or 20 (big).')
    seed: int = _field(0, 'Seed of weights initialisation and data shuffling.')
    init_from: str | None = _field(None, 'Fine-tune: start from the weights and the SentencePiece vocabulary of this trained run (a model directory). Its preset and vocabulary are used; the optimizer starts fresh.')

    bleu_sentences: int = _field(500, 'After every checkpoint interval, translate this many validation sentences and log sacreBLEU and chrF as val_bleu and val_chrf (0: off).')
    bleu_beam_size: int = _field(1, 'Beam size of that validation decoding (1: greedy, the fastest).')
    early_stopping: int = _field(0, 'Stop after this many checkpoint intervals without a better val_bleu (0: never).')
    average_last: int = _field(5, 'At the end, average the last this many kept checkpoints (the paper: 5 for base, 20 for big); the last, the averaged and the best (by val_bleu) checkpoints are scored on the validation set, and the best of the three is tested and exported.')

    beam_size: int = _field(4, 'Beam size for evaluation and export (the paper: 4).')
    alpha: float = _field(0.6, 'Length penalty exponent of beam search (the paper: 0.6).')
    max_output_extra: int = _field(50, 'Outputs may be at most input length + this many pieces (the paper: 50).')

    model_dir: str | None = _field(None, 'Checkpoints, the backup for resuming, TensorBoard logs, the vocabulary and run_config.json go here (default: runs/<dataset>-<preset>, e.g. runs/numerals_en_de-small).')
    export_dir: str | None = _field(None, 'Export a SavedModel to <export_dir>/<version>/ at the end (default: saved_models/<dataset>, e.g. saved_models/numerals_en_de; empty: no export).')

    def __post_init__(self):
        presets.get_preset(self.preset)  # raises on unknown names
        _check_choice("strategy", self.strategy, STRATEGIES)
        _check_choice("precision", self.precision, PRECISIONS)
        for name in ("steps", "batch_tokens", "grad_accum", "checkpoint_every", "keep_checkpoints",
                     "vocab_size", "max_length", "warmup_steps", "beam_size", "bleu_beam_size", "average_last"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be at least 1; got {getattr(self, name)}.")
        for name in ("bleu_sentences", "early_stopping"):
            if int(getattr(self, name)) < 0:
                raise ValueError(f"{name} must be at least 0; got {getattr(self, name)}.")
        if not 0.0 <= self.cooldown <= 1.0:
            raise ValueError(f"cooldown must be a fraction of the run in [0, 1]; got {self.cooldown}.")
        if self.dropout is not None and not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1); got {self.dropout}.")
        if self.average_last > self.keep_checkpoints:
            raise ValueError(f"average_last ({self.average_last}) cannot exceed keep_checkpoints "
                             f"({self.keep_checkpoints}): only kept checkpoints can be averaged.")
        if self.early_stopping and not self.bleu_sentences:
            raise ValueError("early_stopping needs val_bleu; set bleu_sentences above 0.")
        # Each dataset and preset gets its own folders, so a run on another
        # corpus never resumes (or overwrites) the main job's.
        if self.model_dir is None:
            object.__setattr__(self, "model_dir", os.path.join("runs", f"{dataset_slug(self.dataset)}-{self.preset}"))
        if self.export_dir is None:
            object.__setattr__(self, "export_dir", os.path.join("saved_models", dataset_slug(self.dataset)))

    def check_resumes(self, previous):
        """Raises ValueError if this run cannot continue `previous` (the run
        already in the model directory): it names the settings that differ
        among those that fix the vocabulary and the weights' shapes."""
        changed = [f"--{name.replace('_', '-')} {getattr(previous, name)!r} -> {getattr(self, name)!r}"
                   for name in RESUME_MUST_MATCH if getattr(previous, name) != getattr(self, name)]
        if changed:
            raise ValueError(
                f"{self.model_dir!r} holds a run with other settings ({'; '.join(changed)}); "
                "pass another --model-dir, or delete that folder to start over."
            )

    @property
    def data(self):
        return _section(DataSettings, self)

    @property
    def model(self):
        return _section(ModelSettings, self)

    @property
    def training(self):
        return _section(TrainingSettings, self)

    @property
    def bleu_validation(self):
        return _section(ValidationSettings, self)

    @property
    def decoding(self):
        return _section(DecodingSettings, self, max_input_length=self.max_length,
                        extra_length=self.max_output_extra)

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


def _check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(f"Unknown {name} {value!r}; expected one of {list(choices)}.")
