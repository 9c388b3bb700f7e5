"""The paper's model choice at the end of a run: last, averaged or best checkpoint.

The paper averages the last 5 (base) or 20 (big) checkpoints (section 6.1).
`choose_model` makes up to three candidates from a run's checkpoint folder:
- "last": the newest kept checkpoint;
- "average": the element-wise mean of the last `average_last` kept ones
  that end inside the learning rate's cool-down (with fewer than two, there
  is no average, and no validation decode is spent on one), written to the
  run folder;
- "best": the weights of the interval with the best validation BLEU during
  training (`bleu_validation.BleuValidation`).
It scores each on validation sentences with the run's own decoding (beam
search), and records the one with the highest BLEU (then chrF) in the run
folder; under a time budget, those after the last only while the budget
has time for their decode. The test score, the export and the scripts
then use that model (`RunDir.default_weights`).

`choose_alpha` then chooses the length penalty of that model's beam search
on the same sentences, as the paper chose its beam size and alpha "after
experimentation on the development set" (section 6.1); a time-budgeted
run does so unless --alpha was given (`recipe.train_and_evaluate`).
"""

import dataclasses
import os

from keras_transformer.decoding import evaluation
from keras_transformer.training import bleu_validation, checkpoints

CANDIDATES = ("last", "average", "best")
# The length penalties `choose_alpha` tries, the paper's 0.6 first (ties go to
# it). Dev BLEU of the chosen models of nine runs on three shapes
# (docs/training.md at 28bd8c9): at 0.6 their outputs ran 4-9% short; 1.0-1.2 scored
# 0.3-0.9 higher on LibreOffice and its medium pairs, and the alpha chosen on
# 200 validation pairs gained on the pairs beyond them in all seven of those
# runs; on the short pairs the penalties moved BLEU by at most 0.25. 1.4
# overshot (outputs 1-14% long, 0.4-4.2 lower).
ALPHAS = (0.6, 0.8, 1.0, 1.2)


@dataclasses.dataclass(frozen=True)
class ModelChoice:
    """The model choice's outcome: the `chosen` candidate's name and weights
    `path`, each candidate's validation `scores` ({name: {"bleu", "chrf",
    "exact_match"}}), and how many `validation_sentences` they were scored on.
    The run's model choice record (`RunDir.write_choice`) holds the same."""

    chosen: str
    path: str
    scores: dict
    validation_sentences: int
    # `choose_alpha`'s: the length penalty chosen, and the chosen model's scores at each one tried.
    alpha: float = None
    alpha_scores: dict = None
    # The candidates not decoded: the time budget had no time for them (`choose_model`'s `worth_trying`).
    untried: tuple = ()


def candidates(run_dir, average_last, first_interval=0):
    """{name: weights path} of a run (a `RunDir`), without duplicates: "best"
    is left out when it is the last interval, "average" when it would average
    one file. Only checkpoints of intervals from `first_interval` on (those
    that end inside the cool-down) are averaged."""
    kept = run_dir.checkpoints()
    if not kept:
        raise FileNotFoundError(f"No checkpoints in {run_dir.checkpoint_dir!r}.")
    found = {"last": kept[-1]}
    to_average = [path for path in kept[-int(average_last):] if run_dir.checkpoint_interval(path) >= first_interval]
    if len(to_average) > 1:
        found["average"] = run_dir.average_weights_path
        checkpoints.average_checkpoints(to_average, found["average"])
    best_epoch = bleu_validation.read_state(run_dir)["best_epoch"]
    if (os.path.exists(run_dir.best_weights_path) and best_epoch is not None
            and best_epoch != run_dir.checkpoint_interval(kept[-1])):
        found["best"] = run_dir.best_weights_path
    return found


def choose_model(run_dir, model, translate, sentences, references, average_last=5, first_interval=0,
                 worth_trying=None):
    """Scores the candidates of `run_dir` and records the choice. The average
    is of the last `average_last` checkpoints from `first_interval` on.

    model: the run's built model; its weights are set to each candidate in
        turn and left at the chosen one.
    translate: list of str -> list of str with `model`'s current weights.
    worth_trying: None, or () -> bool, asked before each candidate after the
        last checkpoint; at the first False the rest are not decoded (a time
        budget's guard, `budget.decode_fits`). `scores` holds those decoded.
    Returns the `ModelChoice`.
    """
    found = candidates(run_dir, average_last, first_interval)
    scores = {}
    for name, path in found.items():
        if scores and worth_trying is not None and not worth_trying():
            break
        model.load_weights(path)
        figures = evaluation.score(translate(sentences), references)
        scores[name] = {k: figures[k] for k in ("bleu", "chrf", "exact_match")}
    chosen = max(scores, key=lambda name: (scores[name]["bleu"], scores[name]["chrf"], -CANDIDATES.index(name)))
    model.load_weights(found[chosen])
    choice = ModelChoice(chosen, found[chosen], scores, len(sentences),
                         untried=tuple(name for name in found if name not in scores))
    run_dir.write_choice(dataclasses.asdict(choice))
    return choice


def choose_alpha(run_dir, choice, translate_at, sentences, references, alphas=ALPHAS, worth_trying=None):
    """The `ModelChoice` `choice`, made at `alphas[0]`, with the length penalty
    of `alphas` under which its model scores the highest BLEU (then chrF;
    ties go to the earlier) on the same `sentences`, recorded in the run
    folder. The chosen model's scores at `alphas[0]` are the choice's own,
    so each further alpha costs one decode.

    translate_at: alpha -> (list of str -> list of str), the chosen model's
        beam search at that length penalty.
    worth_trying: None, or () -> bool, asked before each further alpha; at
        the first False the rest of `alphas` are not tried (a time budget's
        guard, `budget.decode_fits`). `alpha_scores` holds those tried.
    """
    scores = {alphas[0]: choice.scores[choice.chosen]}
    for alpha in alphas[1:]:
        if worth_trying is not None and not worth_trying():
            break
        figures = evaluation.score(translate_at(alpha)(sentences), references)
        scores[alpha] = {k: figures[k] for k in ("bleu", "chrf", "exact_match")}
    best = best_alpha(scores, alphas)
    choice = dataclasses.replace(choice, alpha=float(best),
                                 alpha_scores={f"{alpha:g}": figures for alpha, figures in scores.items()})
    run_dir.write_choice(dataclasses.asdict(choice))
    return choice


def best_alpha(scores, alphas=ALPHAS):
    """The length penalty of `scores` ({alpha: {"bleu", "chrf", ...}}, alphas
    of `alphas`) with the highest BLEU, then chrF; ties go to the earlier in `alphas`."""
    return max(scores, key=lambda alpha: (scores[alpha]["bleu"], scores[alpha]["chrf"], -alphas.index(alpha)))
