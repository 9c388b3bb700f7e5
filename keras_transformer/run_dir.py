"""A run folder: the one place that knows its layout.

    <model_dir>/
      run_config.json            the run's settings (`config.RunConfig`), with
                                 the precision it trained in
      sentencepiece.model        the shared vocabulary
      checkpoints/
        ckpt-00001.weights.h5    one per checkpoint interval, the last few kept
        best.weights.h5          the interval with the best val_bleu
        average.weights.h5       the mean of the last kept checkpoints
        validation.json          val_bleu / val_chrf of every interval
      model_choice.json          which of last / average / best the run uses
      budget.json                with --time-budget: the recipe's choices,
                                 the time spent, by part, and the updates
                                 made (`training.budget.Record`)
      backup/                    Keras' BackupAndRestore state, for resuming
      logs/                      TensorBoard
      <split>.hypotheses.txt     translations written by evaluation
      workers/<id>/              the private folders of non-chief workers

Intervals count from 0 everywhere in the package (they are Keras epochs);
the checkpoint of interval i is `ckpt-(i+1)`, and `checkpoint_path` /
`checkpoint_interval` are the only conversions between the two.
"""

import glob
import json
import os
import re

from keras_transformer.config import RunConfig
from keras_transformer.files import atomic_open

_CHECKPOINT_RE = re.compile(r"ckpt-(\d+)\.weights\.h5$")


def default_model_dir(dataset_slug, preset):
    """Where a run goes unless --model-dir says otherwise: runs/<dataset>-<preset>."""
    return os.path.join("runs", f"{dataset_slug}-{preset}")


def default_export_dir(dataset_slug):
    """Where a run's SavedModel goes unless --export-dir says otherwise: saved_models/<dataset>."""
    return os.path.join("saved_models", dataset_slug)


class RunDir:
    """Paths and records of one run folder. Creates nothing until asked to write."""

    CONFIG = "run_config.json"
    VOCABULARY = "sentencepiece.model"
    CHOICE = "model_choice.json"
    BUDGET = "budget.json"
    RECORD = "record.json"

    def __init__(self, path):
        self.path = str(path)

    def __repr__(self):
        return f"RunDir({self.path!r})"

    def _join(self, *parts):
        return os.path.join(self.path, *parts)

    # ---------------------------------------------------------------- files
    @property
    def config_path(self):
        return self._join(self.CONFIG)

    @property
    def vocabulary_path(self):
        return self._join(self.VOCABULARY)

    @property
    def checkpoint_dir(self):
        return self._join("checkpoints")

    @property
    def best_weights_path(self):
        return self._join("checkpoints", "best.weights.h5")

    @property
    def average_weights_path(self):
        return self._join("checkpoints", "average.weights.h5")

    @property
    def validation_state_path(self):
        return self._join("checkpoints", "validation.json")

    @property
    def choice_path(self):
        return self._join(self.CHOICE)

    @property
    def budget_path(self):
        return self._join(self.BUDGET)

    @property
    def record_path(self):
        return self._join(self.RECORD)

    @property
    def backup_dir(self):
        return self._join("backup")

    @property
    def logs_dir(self):
        return self._join("logs")

    def hypotheses_path(self, split):
        return self._join(f"{split}.hypotheses.txt")

    def worker(self, task_id):
        """The private run folder of non-chief worker `task_id`."""
        return RunDir(self._join("workers", str(task_id)))

    # ---------------------------------------------------------------- checkpoints
    # `ModelCheckpoint` fills in Keras' 1-based epoch.
    CHECKPOINT_PATTERN = "ckpt-{epoch:05d}.weights.h5"

    def checkpoint_path(self, interval):
        """The kept checkpoint of `interval` (counted from 0)."""
        return os.path.join(self.checkpoint_dir, self.CHECKPOINT_PATTERN.format(epoch=int(interval) + 1))

    @staticmethod
    def checkpoint_interval(path):
        """The interval (from 0) whose checkpoint `path` is, or None for another file."""
        match = _CHECKPOINT_RE.search(os.path.basename(path))
        return int(match.group(1)) - 1 if match else None

    def checkpoints(self):
        """The kept checkpoint files, oldest first."""
        found = [(self.checkpoint_interval(p), p) for p in glob.glob(os.path.join(self.checkpoint_dir, "ckpt-*"))]
        return [path for interval, path in sorted(found) if interval is not None]

    def default_weights(self):
        """The weights a trained run is used with: the model its main job chose
        (`model_choice.json`), else its newest checkpoint."""
        choice = self.read_choice()
        if choice is not None:
            path = self._join(choice["path"])
            if os.path.exists(path):
                return path
        found = self.checkpoints()
        if not found:
            raise FileNotFoundError(f"No checkpoints in {self.checkpoint_dir!r}; is {self.path!r} a trained run?")
        return found[-1]

    # ---------------------------------------------------------------- records
    def has_config(self):
        return os.path.exists(self.config_path)

    def load_config(self):
        if not self.has_config():
            raise FileNotFoundError(
                f"{self.config_path!r} does not exist; is {self.path!r} a model directory written by "
                "scripts/train.py?"
            )
        with open(self.config_path, encoding="utf-8") as f:
            return RunConfig.from_dict(json.load(f), source=self.config_path)

    def save_config(self, config):
        self._write_json(self.config_path, config.to_dict(), sort_keys=True)

    def read_choice(self):
        """The model choice record, or None before the main job has chosen."""
        return self._read_json(self.choice_path)

    def write_choice(self, record):
        """Records the model choice; `record["path"]` is stored relative to the run folder."""
        self._write_json(self.choice_path, {**record, "path": os.path.relpath(record["path"], self.path)})

    def read_budget(self):
        """The time budget record (see `training.budget`), or None without a budget."""
        return self._read_json(self.budget_path)

    def write_budget(self, record):
        """Writes the time budget record (a dict, whole: `training.budget.save`)."""
        self._write_json(self.budget_path, record)

    def write_record(self, record):
        """Writes the finished run's record (`cli.records`: command, machine, scores)."""
        self._write_json(self.record_path, record)

    def read_record(self):
        """The finished run's record, or None before the run has finished."""
        return self._read_json(self.record_path)

    def read_validation_state(self):
        """The raw validation record (see `training.bleu_validation`), or None."""
        return self._read_json(self.validation_state_path)

    def write_validation_state(self, state):
        self._write_json(self.validation_state_path, state)

    @staticmethod
    def _read_json(path):
        if not os.path.exists(path):
            return None
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    @staticmethod
    def _write_json(path, value, sort_keys=False):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with atomic_open(path) as f:
            json.dump(value, f, indent=2, sort_keys=sort_keys)
