"""Checkpoints: keep the last N during training, and average them afterwards.

The paper averages the last 5 checkpoints for base models and the last 20 for
big ones (section 6.1). Checkpoints are Keras `.weights.h5` files, one per
checkpoint interval; `run_dir.RunDir` names and lists them.
"""

import os

import h5py
import keras
import numpy as np

from keras_transformer.files import atomic_path


class KeepLastCheckpoints(keras.callbacks.ModelCheckpoint):
    """`ModelCheckpoint` that saves weights every epoch into the run folder's
    checkpoint folder and keeps only the last `keep`.

    run_dir: a `run_dir.RunDir`, which names the files.
    """

    def __init__(self, run_dir, keep=5, **kwargs):
        if int(keep) < 1:
            raise ValueError(f"keep must be at least 1; got {keep}.")
        os.makedirs(run_dir.checkpoint_dir, exist_ok=True)
        super().__init__(
            os.path.join(run_dir.checkpoint_dir, run_dir.CHECKPOINT_PATTERN), save_weights_only=True, **kwargs
        )
        self.run_dir = run_dir
        self.keep = int(keep)

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        for path in self.run_dir.checkpoints()[: -self.keep]:
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
        with atomic_path(output) as tmp, h5py.File(tmp, "w") as target:
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

