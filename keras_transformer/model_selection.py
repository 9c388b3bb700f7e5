"""The paper's model choice at the end of a run: last, averaged or best checkpoint.

The paper averages the last 5 (base) or 20 (big) checkpoints (section 6.1).
`choose_model` makes up to three candidates from a run's checkpoint folder:
- "last": the newest kept checkpoint;
- "average": the element-wise mean of the last `average_last` kept ones,
  written to `checkpoints/average.weights.h5`;
- "best": `checkpoints/best.weights.h5`, the interval with the best
  validation BLEU during training (`validation.BleuValidation`).
It scores each on validation sentences with the run's own decoding (beam
search), and records the one with the highest BLEU (then chrF) in `model_choice.json`
XX. The test score, the export and the
scripts then use that model (`checkpoints.default_weights`).
"""

import json
import os

from keras_transformer import checkpoints, evaluation, validation
from keras_transformer.files import atomic_open

AVERAGE_FILENAME = "average.weights.h5"
CANDIDATES = ("last", "average", "best")


def candidates(model_dir, average_last):
    """{name: weights path} of a run, without duplicates: "best" is left out
    when it is the last interval, "average" when it would average one file."""
    directory = os.path.join(model_dir, "checkpoints")
    kept = checkpoints.list_checkpoints(directory)
    if not kept:
        raise FileNotFoundError(f"No checkpoints in {directory!r}.")
    found = {"last": kept[-1]}
    to_average = kept[-int(average_last):]
    if len(to_average) > 1:
        found["average"] = os.path.join(directory, AVERAGE_FILENAME)
        checkpoints.average_checkpoints(to_average, found["average"])
    best = os.path.join(directory, validation.BEST_FILENAME)
    best_epoch = validation.read_state(directory)["best_epoch"]
    if os.path.exists(best) and best_epoch is not None and best_epoch + 1 != checkpoints.checkpoint_number(kept[-1]):
        found["best"] = best
    return found


def choose_model(model_dir, model, translate, sentences, references, average_last=5):
    """Scores the candidates of `model_dir` and records the choice.

    model: the run's built model; its weights are set to each candidate in
        turn and left at the chosen one.
    translate: list of str -> list of str with `model`'s current weights.
    Returns {"chosen": name, "path": weights path, "scores": {name: {"bleu",
    "chrf", "exact_match"}}}; `model_choice.json` holds the same, with the
    path relative to `model_dir`.
    """
    found = candidates(model_dir, average_last)
    scores = {}
    for name, path in found.items():
        model.load_weights(path)
        figures = evaluation.score(translate(sentences), references)
        scores[name] = {k: figures[k] for k in ("bleu", "chrf", "exact_match")}
    chosen = max(found, key=lambda name: (scores[name]["bleu"], scores[name]["chrf"], -CANDIDATES.index(name)))
    model.load_weights(found[chosen])
    record = {"chosen": chosen, "path": os.path.relpath(found[chosen], model_dir),
              "validation_sentences": len(sentences), "scores": scores}
    path = os.path.join(model_dir, checkpoints.CHOICE_FILENAME)
    with atomic_open(path) as f:
        json.dump(record, f, indent=2)
    return {**record, "path": found[chosen]}
