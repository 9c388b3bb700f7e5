"""A model's weights as arrays, keyed so that two instances of one architecture compare."""

import numpy as np


def weights_by_path(model):
    """Weights keyed by their path below the model (model names differ per instance)."""
    return {w.path.split("/", 1)[1]: np.asarray(w) for w in model.weights}
