"""Checkpoints: keep the last N during training, and average them afterwards.

The paper averages the last 5 checkpoints for base models and the last 20 for
big ones (section 6.1). Checkpoints are Keras `.weights.h5` files named
`ckpt-<epoch>.weights.h5`; one epoch is one checkpoint interval of steps.
"""

import glob
import json
import os
import re

import h5py
import keras
import numpy as np

CHECKPOINT_PATTERN = "ckpt-{epoch:05d}.weights.h5"
_CHECKPOINT_RE = re.compile(r"ckpt-(\d+)\.weights\.h5$")


def checkpoint_number(path):
    """N of a `ckpt-N.weights.h5` file (the epoch counted from 1), or None for another file."""
    match = _CHECKPOINT_RE.search(os.path.basename(path))
    return int(match.group(1)) if match else None


def list_checkpoints(directory):
    """Checkpoint files in `directory`, oldest first."""
    found = [(checkpoint_number(path), path) for path in glob.glob(os.path.join(directory, "ckpt-*.weights.h5"))]
    return [path for number, path in sorted(found) if number is not None]


class KeepLastCheckpoints(keras.callbacks.ModelCheckpoint):
    """`ModelCheckpoint` that saves weights every epoch and keeps only the last `keep`."""

    def __init__(self, directory, keep=5, **kwargs):
        if int(keep) < 1:
            raise ValueError(f"keep must be at least 1; got {keep}.")
        os.makedirs(directory, exist_ok=True)
        super().__init__(
            os.path.join(directory, CHECKPOINT_PATTERN), save_weights_only=True, **kwargs
        )
        self.directory = directory
        self.keep = int(keep)

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        for path in list_checkpoints(self.directory)[: -self.keep]:
            os.remove(path)


def average_checkpoints(paths, output):
    """Writes to `output` the element-wise mean of the model weights in `paths`.

    Works on the `.weights.h5` files directly, so no model needs building.
    Optimizer state (which is not averaged) is copied from the newest file.
    Returns the number of averaged weight arrays.
    """
    if not paths:
        raise ValueError("No checkpoints to average.")
    for path in paths:
        if not os.path.exists(path):
            raise FileNotFoundError(f"Checkpoint {path!r} does not exist.")
    sources = [h5py.File(path, "r") for path in paths]
    try:
        names = []
        sources[-1].visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
        os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
        averaged = 0
        with h5py.File(output, "w") as target:
            for key, value in sources[-1].attrs.items():
                target.attrs[key] = value
            for name in names:
                newest = sources[-1][name]
                if name.startswith("optimizer/") or not np.issubdtype(newest.dtype, np.floating):
                    data = newest[()]
                else:
                    stacked = np.stack([np.asarray(src[name][()], np.float64) for src in sources])
                    data = stacked.mean(axis=0).astype(newest.dtype)
                    averaged += 1
                target.create_dataset(name, data=data)
            # Copy group attributes (Keras stores none of importance today, but keep them).
            def copy_attrs(name, obj):
                if isinstance(obj, h5py.Group) and name in target:
                    for key, value in obj.attrs.items():
                        target[name].attrs[key] = value
            sources[-1].visititems(copy_attrs)
        return averaged
    finally:
        for source in sources:
            source.close()


CHOICE_FILENAME = "model_choice.json"


def default_weights(model_dir):
    """The weights a trained run is used with: the model the main job chose
    (`model_choice.json`, see `model_selection`), else the newest checkpoint."""
    choice = os.path.join(model_dir, CHOICE_FILENAME)
    if os.path.exists(choice):
        with open(choice) as f:
            path = os.path.join(model_dir, json.load(f)["path"])
        if os.path.exists(path):
            return path
    found = list_checkpoints(os.path.join(model_dir, "checkpoints"))
    if not found:
        raise FileNotFoundError(f"No checkpoints in {os.path.join(model_dir, 'checkpoints')!r}.")
    return found[-1]
