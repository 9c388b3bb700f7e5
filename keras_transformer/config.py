"""Run settings: one frozen dataclass, written to `<model_dir>/run_config.json`.

`scripts/train.py` fills a `RunConfig` from its flags; the translate,
evaluate and export scripts read it back from the model directory, so they
rebuild exactly the model that was trained.
"""

import dataclasses
import json
import os

from keras_transformer import presets

STRATEGIES = ("default", "mirrored", "multi_worker", "tpu")
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
RUN_CONFIG_FILENAME = "run_config.json"


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """Everything a training run needs; every field is a flag of scripts/train.py."""

    # Data: a tfds name, PATH.tsv, or SOURCE_PATH,TARGET_PATH.
    dataset: str = "numerals_en_de"
    # Language keys of a tfds translation dataset (default: its supervised keys).
    source_lang: str | None = None
    target_lang: str | None = None
    # Where tfds keeps prepared datasets (default: ~/tensorflow_datasets).
    data_dir: str | None = None
    # Shared SentencePiece vocabulary size (the paper: 37000 for WMT14 En-De).
    vocab_size: int = 1000
    # Pairs longer than this many pieces (either side) are left out of training.
    max_length: int = 64

    # Model preset (tiny, small, base, big) of keras_transformer.presets.
    preset: str = "small"

    # tf.distribute strategy; multi_worker reads TF_CONFIG.
    strategy: str = "default"
    # Optimizer updates to run in total.
    steps: int = 3000
    # Tokens per side in one global batch, padding included (the paper: ~25000).
    batch_tokens: int = 4096
    # Accumulate gradients over this many batches per update.
    grad_accum: int = 1
    # Keras dtype policy; mixed_float16 gets dynamic loss scaling.
    precision: str = "float32"
    # Compile the train step with XLA.
    jit_compile: bool = False
    # Warm-up steps of the learning-rate schedule (the paper: 4000).
    warmup_steps: int = 4000
    # Multiplies the schedule (the paper: 1.0).
    learning_rate_scale: float = 1.0
    # Label smoothing epsilon (the paper: 0.1).
    label_smoothing: float = 0.1
    # Updates between checkpoints (and validation runs and backups).
    checkpoint_every: int = 500
    # Checkpoints kept on disk; the paper averages the last 5 (base) or 20 (big).
    keep_checkpoints: int = 5
    # Seed of weights initialisation and data shuffling.
    seed: int = 0

    # Decoding, for evaluation and export (the paper: beam 4, alpha 0.6, +50).
    beam_size: int = 4
    alpha: float = 0.6
    max_output_extra: int = 50

    # Checkpoints, backups, logs, vocabulary and run_config.json go here.
    model_dir: str = "runs/numerals_en_de-small"
    # Export a SavedModel to <export_dir>/<version>/ at the end (empty: no export).
    export_dir: str = "saved_models/numerals_en_de"

    def __post_init__(self):
        presets.get_preset(self.preset)  # raises on unknown names
        _check_choice("strategy", self.strategy, STRATEGIES)
        _check_choice("precision", self.precision, PRECISIONS)
        for name in ("steps", "batch_tokens", "grad_accum", "checkpoint_every", "keep_checkpoints",
                     "vocab_size", "max_length", "warmup_steps", "beam_size"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be at least 1; got {getattr(self, name)}.")

    @property
    def epochs(self):
        """Keras epochs: one per checkpoint interval (the last may be shorter; see training)."""
        return -(-self.steps // self.checkpoint_every)

    def save(self, model_dir=None):
        path = os.path.join(model_dir or self.model_dir, RUN_CONFIG_FILENAME)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(dataclasses.asdict(self), f, indent=2, sort_keys=True)
        os.replace(tmp, path)

    @classmethod
    def load(cls, model_dir):
        path = os.path.join(model_dir, RUN_CONFIG_FILENAME)
        if not os.path.exists(path):
            raise FileNotFoundError(
                f"{path!r} does not exist; is {model_dir!r} a model directory written by scripts/train.py?"
            )
        with open(path) as f:
            values = json.load(f)
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})


def _check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(f"Unknown {name} {value!r}; expected one of {list(choices)}.")
