"""Validation BLEU and chrF of a run against training time and updates, as a PNG.

It reads the run's validation record, which `bleu_validation.BleuValidation`
writes after every checkpoint interval and which survives kills and resumes,
so the curve of a resumed run is whole.
"""

import os

from keras_transformer.run_dir import RunDir
from keras_transformer.training import bleu_validation


def read_curve(model_dir):
    """[(updates, minutes, val_bleu, val_chrf)] of a run, in interval order."""
    run_dir = RunDir(model_dir)
    state = bleu_validation.read_state(run_dir)
    if not state["scores"]:
        raise FileNotFoundError(
            f"{run_dir.validation_state_path!r} holds no scores; "
            "was the run trained with --bleu-sentences above 0?")
    return [(s["updates"], s["seconds"] / 60, s["val_bleu"], s["val_chrf"])
            for _, s in sorted(state["scores"].items())]


def plot_history(model_dir, output, title=None):
    """Writes the PNG to `output`: two panels, against minutes and against updates. Returns `output`."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    updates, minutes, bleu, chrf = zip(*read_curve(model_dir))
    figure, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for axis, x, label in ((axes[0], minutes, "training minutes (validation included)"),
                           (axes[1], updates, "optimizer updates")):
        axis.plot(x, bleu, "o-", label="val_bleu (sacreBLEU)")
        axis.plot(x, chrf, "s--", label="val_chrf (chrF)")
        axis.set_xlabel(label)
        axis.grid(alpha=0.3)
    axes[0].set_ylabel("score on validation sentences")
    axes[0].legend(loc="lower right")
    figure.suptitle(title or f"Validation scores of {model_dir}", fontsize=10)
    figure.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    figure.savefig(output, dpi=110)
    plt.close(figure)
    return output
