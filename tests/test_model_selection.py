import json
import os

import keras
import numpy as np
import pytest

from keras_transformer import checkpoints, model_selection, validation

REFERENCES = [f"Satz {i} ." for i in range(20)]


def marked_model(weight=0.0):
    inputs = keras.Input((1,))
    model = keras.Model(inputs, keras.layers.Dense(1, use_bias=False)(inputs))
    model.layers[-1].kernel.assign(np.full((1, 1), weight, np.float32))
    return model


def make_run(tmp_path, weights, best_epoch):
    """A run folder whose kept checkpoints hold one weight each (interval i -> weights[i])
    and whose best interval is `best_epoch`."""
    directory = tmp_path / "checkpoints"
    directory.mkdir()
    for epoch, weight in enumerate(weights):
        marked_model(weight).save_weights(str(directory / checkpoints.CHECKPOINT_PATTERN.format(epoch=epoch + 1)))
    marked_model(weights[best_epoch]).save_weights(str(directory / validation.BEST_FILENAME))
    with open(directory / validation.STATE_FILENAME, "w") as f:
        json.dump({"scores": {str(e): {"val_bleu": 0.0} for e in range(len(weights))}, "best_epoch": best_epoch}, f)
    return str(tmp_path)


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
    model_dir = make_run(tmp_path, [0.0, 1.0, 2.0, 3.0, 4.0], best_epoch=1)
    model = marked_model()
    choice = model_selection.choose_model(model_dir, model, translate_by_weight(model, quality), REFERENCES,
                                          REFERENCES, average_last=3)
    assert choice["chosen"] == chosen
    assert float(model.layers[-1].kernel[0, 0]) == weight  # the model is left at the chosen weights
    assert set(choice["scores"]) == {"last", "average", "best"}
    bleu = {name: s["bleu"] for name, s in choice["scores"].items()}
    assert bleu[chosen] == max(bleu.values())
    restored = marked_model()
    restored.load_weights(checkpoints.default_weights(model_dir))  # what the scripts load afterwards
    assert float(restored.layers[-1].kernel[0, 0]) == weight
    with open(os.path.join(model_dir, checkpoints.CHOICE_FILENAME)) as f:
        assert json.load(f)["chosen"] == chosen


def test_best_is_left_out_when_it_is_the_last_interval_and_average_needs_two(tmp_path):
    model_dir = make_run(tmp_path, [0.0, 1.0, 2.0], best_epoch=2)
    assert set(model_selection.candidates(model_dir, average_last=2)) == {"last", "average"}
    assert set(model_selection.candidates(model_dir, average_last=1)) == {"last"}


def test_without_a_choice_the_scripts_use_the_newest_checkpoint(tmp_path):
    model_dir = make_run(tmp_path, [0.0, 1.0], best_epoch=0)
    assert checkpoints.default_weights(model_dir).endswith("ckpt-00002.weights.h5")
    with pytest.raises(FileNotFoundError, match="No checkpoints"):
        checkpoints.default_weights(str(tmp_path / "empty"))
