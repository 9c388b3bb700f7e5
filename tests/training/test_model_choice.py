import json
import os

import keras
import numpy as np
import pytest

from keras_transformer.run_dir import RunDir
from keras_transformer.training import model_choice

REFERENCES = [f"Satz {i} ." for i in range(20)]


def marked_model(weight=0.0):
    inputs = keras.Input((1,))
    model = keras.Model(inputs, keras.layers.Dense(1, use_bias=False)(inputs))
    model.layers[-1].kernel.assign(np.full((1, 1), weight, np.float32))
    return model


def make_run(tmp_path, weights, best_epoch):
    """A run folder whose kept checkpoints hold one weight each (interval i -> weights[i])
    and whose best interval is `best_epoch`."""
    run_dir = RunDir(tmp_path)
    os.makedirs(run_dir.checkpoint_dir)
    for epoch, weight in enumerate(weights):
        marked_model(weight).save_weights(run_dir.checkpoint_path(epoch))
    marked_model(weights[best_epoch]).save_weights(run_dir.best_weights_path)
    run_dir.write_validation_state({"scores": {str(e): {"val_bleu": 0.0} for e in range(len(weights))},
                                    "best_epoch": best_epoch})
    return run_dir


def translate_by_weight(model, quality):
    """Translations whose share of right sentences is quality(weight)."""
    def translate(sentences):
        right = int(quality(float(model.layers[-1].kernel.numpy()[0, 0])) * len(sentences))
        return REFERENCES[:right] + ["falsch"] * (len(sentences) - right)
    return translate


@pytest.mark.parametrize("quality,chosen,weight", [
    (lambda w: {1.0: 0.9}.get(w, 0.2), "best", 1.0),  # the best interval (weight 1) wins
    (lambda w: 0.9 if w == 3.0 else 0.2, "average", 3.0),  # the mean of 2, 3, 4 is 3
    (lambda w: 0.9 if w == 4.0 else 0.2, "last", 4.0),
    (lambda w: 0.5, "last", 4.0),  # a tie goes to the last checkpoint
])
def test_the_choice_follows_validation_bleu(tmp_path, quality, chosen, weight):
    run_dir = make_run(tmp_path, [0.0, 1.0, 2.0, 3.0, 4.0], best_epoch=1)
    model = marked_model()
    choice = model_choice.choose_model(run_dir, model, translate_by_weight(model, quality), REFERENCES,
                                       REFERENCES, average_last=3)
    assert choice.chosen == chosen
    assert float(model.layers[-1].kernel[0, 0]) == weight  # the model is left at the chosen weights
    assert set(choice.scores) == {"last", "average", "best"}
    bleu = {name: s["bleu"] for name, s in choice.scores.items()}
    assert bleu[chosen] == max(bleu.values())
    restored = marked_model()
    restored.load_weights(RunDir(tmp_path).default_weights())  # what the scripts load afterwards
    assert float(restored.layers[-1].kernel[0, 0]) == weight
    with open(tmp_path / "model_choice.json") as f:  # the file name is part of the run folder's contract
        record = json.load(f)
    assert record["chosen"] == chosen and not os.path.isabs(record["path"])
    assert record["scores"] == choice.scores and record["validation_sentences"] == len(REFERENCES)


def test_best_is_left_out_when_it_is_the_last_interval_and_average_needs_two(tmp_path):
    run_dir = make_run(tmp_path, [0.0, 1.0, 2.0], best_epoch=2)
    assert set(model_choice.candidates(run_dir, average_last=2)) == {"last", "average"}
    assert set(model_choice.candidates(run_dir, average_last=1)) == {"last"}


def test_without_a_choice_the_scripts_use_the_newest_checkpoint(tmp_path):
    run_dir = make_run(tmp_path, [0.0, 1.0], best_epoch=0)
    assert run_dir.default_weights().endswith("ckpt-00002.weights.h5")
    with pytest.raises(FileNotFoundError, match="No checkpoints"):
        RunDir(tmp_path / "empty").default_weights()


def test_only_checkpoints_inside_the_cool_down_are_averaged(tmp_path):
    run_dir = make_run(tmp_path, [0.0, 1.0, 2.0, 3.0, 4.0], best_epoch=1)
    found = model_choice.candidates(run_dir, average_last=5, first_interval=3)
    assert set(found) == {"last", "average", "best"}
    averaged = marked_model()
    averaged.load_weights(found["average"])
    assert float(averaged.layers[-1].kernel.numpy()[0, 0]) == pytest.approx(3.5)  # intervals 3 and 4 only


def test_a_run_with_one_checkpoint_in_the_cool_down_has_no_average(tmp_path):
    run_dir = make_run(tmp_path, [0.0, 1.0, 2.0], best_epoch=2)
    assert set(model_choice.candidates(run_dir, average_last=5, first_interval=2)) == {"last"}
    decodes = []

    def translate(sentences):
        decodes.append(len(sentences))
        return sentences

    record = model_choice.choose_model(run_dir, marked_model(), translate, REFERENCES, REFERENCES, 5, 2)
    assert set(record.scores) == {"last"} and len(decodes) == 1  # no validation decode spent on an average


@pytest.mark.parametrize("right_at,chosen", [
    ({0.6: 0.5, 0.8: 0.5, 1.0: 0.7, 1.2: 0.6}, 1.0),  # the best BLEU wins
    ({0.6: 0.5, 0.8: 0.5, 1.0: 0.5, 1.2: 0.5}, 0.6),  # a tie goes to the paper's
    ({0.6: 0.5, 0.8: 0.6, 1.0: 0.6, 1.2: 0.2}, 0.8),  # and between the others to the smaller
])
def test_the_length_penalty_follows_validation_bleu_and_ties_go_to_the_papers(tmp_path, right_at, chosen):
    """`choose_alpha` decodes the chosen model once per further alpha (the
    choice's own scores stand for the first), keeps the one with the best
    BLEU, and records it with every alpha's scores beside the model choice."""
    from keras_transformer.config import PAPER_ALPHA

    assert model_choice.ALPHAS[0] == PAPER_ALPHA
    run_dir = make_run(tmp_path, [0.0, 1.0], best_epoch=1)
    model = marked_model()
    choice = model_choice.choose_model(run_dir, model, translate_by_weight(model, lambda w: right_at[0.6]),
                                       REFERENCES, REFERENCES, average_last=1)
    decoded = []

    def translate_at(alpha):
        decoded.append(alpha)
        return lambda sentences: translate_by_weight(model, lambda w: right_at[alpha])(sentences)

    with_alpha = model_choice.choose_alpha(run_dir, choice, translate_at, REFERENCES, REFERENCES)
    assert decoded == list(model_choice.ALPHAS[1:])
    assert with_alpha.alpha == chosen and (with_alpha.chosen, with_alpha.scores) == (choice.chosen, choice.scores)
    bleu = {float(alpha): s["bleu"] for alpha, s in with_alpha.alpha_scores.items()}
    assert set(bleu) == set(model_choice.ALPHAS) and bleu[0.6] == choice.scores[choice.chosen]["bleu"]
    assert bleu[chosen] == max(bleu.values())
    with open(tmp_path / "model_choice.json") as f:
        record = json.load(f)
    assert record["alpha"] == chosen and record["alpha_scores"] == with_alpha.alpha_scores
    assert run_dir.default_weights() == run_dir._join(record["path"])  # the chosen weights stay the scripts'


def test_the_length_penalties_stop_at_the_first_one_the_budget_has_no_time_for(tmp_path):
    """With `worth_trying` (a time budget's guard), the alphas after its first
    False are not decoded, and the choice is made among those tried."""
    run_dir = make_run(tmp_path, [0.0, 1.0], best_epoch=1)
    model = marked_model()
    right_at = {0.6: 0.5, 0.8: 0.6, 1.0: 0.5, 1.2: 0.9}  # 1.2 would win, but there is time for 0.8 only
    choice = model_choice.choose_model(run_dir, model, translate_by_weight(model, lambda w: right_at[0.6]),
                                       REFERENCES, REFERENCES, average_last=1)
    decoded, answers = [], iter([True, False, True])

    def translate_at(alpha):
        decoded.append(alpha)
        return translate_by_weight(model, lambda w: right_at[alpha])

    with_alpha = model_choice.choose_alpha(run_dir, choice, translate_at, REFERENCES, REFERENCES,
                                           worth_trying=lambda: next(answers))
    assert decoded == [0.8] and with_alpha.alpha == 0.8
    assert list(with_alpha.alpha_scores) == ["0.6", "0.8"]


@pytest.mark.parametrize("answers,decoded", [
    ([False], ["last"]),  # the average would win, but there is no time to decode it
    ([True, False], ["last", "average"]),
    ([True, True], ["last", "average", "best"]),
])
def test_the_candidates_stop_at_the_first_one_the_budget_has_no_time_for(tmp_path, answers, decoded):
    """With `worth_trying` (a time budget's guard), asked before each candidate
    after the last checkpoint, those after its first False are not decoded:
    the choice is made among those decoded and names the rest."""
    run_dir = make_run(tmp_path, [0.0, 1.0, 2.0, 3.0, 4.0], best_epoch=1)
    model = marked_model()
    asked = iter(answers)
    choice = model_choice.choose_model(run_dir, model, translate_by_weight(model, lambda w: 0.9 if w == 3.0 else 0.2),
                                       REFERENCES, REFERENCES, average_last=3, worth_trying=lambda: next(asked))
    assert list(choice.scores) == decoded
    assert choice.untried == tuple(name for name in ("last", "average", "best") if name not in decoded)
    assert choice.chosen == ("average" if "average" in decoded else "last")
    assert float(model.layers[-1].kernel[0, 0]) == (3.0 if "average" in decoded else 4.0)
    assert run_dir.read_choice()["untried"] == list(choice.untried)
