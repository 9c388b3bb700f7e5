"""BLEU while training: the `BleuValidation` callback.

After every checkpoint interval (one Keras epoch) it translates validation
sentences, greedy or with beam search, and scores them with sacreBLEU and
chrF (`evaluation.score`). The scores go into the epoch's logs as `val_bleu`
and `val_chrf`, so the progress bar, the History and TensorBoard show them;
it must therefore come before those callbacks that read the logs.

It keeps the weights of the interval with the best `val_bleu` as
`best.weights.h5` (strictly better replaces; the first of equal scores
stays), and with `patience` > 0 stops training after that many intervals
without a better one.

Nothing is lost when a run is killed. After every interval the score of
every interval so far goes to `validation.json`, atomically, after the best
weights. A resumed run (see `BackupAndRestore`) restarts at the interval
after its last backup; the callback drops the scores of that interval and
later ones (scored but not backed up before the kill), and recomputes the
best interval and the patience counter from the rest, so they are what an
uninterrupted run would have.
"""

import json
import os
import shutil
import time

import keras
import tensorflow as tf

from keras_transformer import checkpoints, decoding, evaluation
from keras_transformer.files import atomic_open
from keras_transformer.translator import Translator, translate_in_batches

STATE_FILENAME = "validation.json"
BEST_FILENAME = "best.weights.h5"


def read_state(directory):
    """{"scores": {epoch: {"val_bleu", "val_chrf", "updates", "seconds"}}, "best_epoch": int | None}
    of a run's checkpoint folder (empty when nothing was scored yet). Epochs
    count from 0; "seconds" are training seconds (validation included) since
    the run began, resumed runs continuing their count."""
    path = os.path.join(directory, STATE_FILENAME)
    if not os.path.exists(path):
        return {"scores": {}, "best_epoch": None}
    with open(path) as f:
        state = json.load(f)
    state["scores"] = {int(epoch): scores for epoch, scores in state["scores"].items()}
    return state


def progress(scores):
    """(best_epoch, intervals since it) over {epoch: {"val_bleu": ...}}; the
    first of equal best scores counts. (None, 0) for no scores."""
    best = None
    for epoch in sorted(scores):
        if best is None or scores[epoch]["val_bleu"] > scores[best]["val_bleu"]:
            best = epoch
    if best is None:
        return None, 0
    return best, sum(1 for epoch in scores if epoch > best)


def stopped_early(directory, patience):
    """True if the run in this checkpoint folder already stopped early."""
    return bool(patience) and progress(read_state(directory)["scores"])[1] >= patience


class ValidationDecoder:
    """(B,) source strings -> (B,) translations, greedy (beam_size 1) or beam search.

    Greedy search skips beam search's bookkeeping, so it is the cheap choice
    for scoring during training. Call `translate(list_of_str)`.
    """

    def __init__(self, model, tokenizer, beam_size=1, alpha=0.6, max_input_length=256,
                 extra_length=decoding.DEFAULT_EXTRA_LENGTH):
        self.translator = Translator(model, tokenizer, beam_size=beam_size, alpha=alpha,
                                     max_input_length=max_input_length, extra_length=extra_length)
        self._function = tf.function(self._translate, input_signature=[tf.TensorSpec([None], tf.string)])

    def _translate(self, sentences):
        t = self.translator
        source_ids = t.encode_sources(sentences)  # (B, S)
        if t.beam_size == 1:
            ids = decoding.greedy_search_graph(t.model, source_ids, extra_length=t.extra_length)
        else:
            ids, _ = decoding.beam_search_graph(t.model, source_ids, t.beam_size, t.alpha,
                                                extra_length=t.extra_length)
        blank = tf.equal(tf.strings.length(tf.strings.strip(sentences)), 0)  # (B,)
        translations = tf.where(blank, "", t.tokenizer.detokenize(ids))
        return translations, tf.zeros(tf.shape(sentences), tf.float32)

    def translate(self, sentences, batch_size=64):
        return translate_in_batches(self._function, sentences, batch_size, progress=False)[0]


class BleuValidation(keras.callbacks.Callback):
    """Scores validation translations after every epoch; keeps the best weights; stops early.

    Args:
        directory: the run's checkpoint folder; `best.weights.h5` and
            `validation.json` go there.
        sentences, references: validation sources and references (lists of str).
        translate: a function list of str -> list of str, called with the
            model's current weights (e.g. `ValidationDecoder(model, ...).translate`).
        patience: stop after this many epochs without a better val_bleu (0: never).
        updates_per_epoch: optimizer updates in one epoch, recorded with the
            scores (with the training seconds so far) for plotting.
    """

    def __init__(self, directory, sentences, references, translate, patience=0, updates_per_epoch=1):
        super().__init__()
        if len(sentences) != len(references):
            raise ValueError(f"{len(sentences)} validation sentences but {len(references)} references.")
        os.makedirs(directory, exist_ok=True)
        self.directory = directory
        self.sentences, self.references = list(sentences), list(references)
        self.translate = translate
        self.patience = int(patience)
        self.updates_per_epoch = int(updates_per_epoch)
        self.state = None

    @property
    def best_path(self):
        return os.path.join(self.directory, BEST_FILENAME)

    def on_epoch_begin(self, epoch, logs=None):
        if self.state is not None:
            return
        # First epoch of this process: a fresh run (epoch 0) or a resumed one.
        state = read_state(self.directory)
        recorded_best = state["best_epoch"]
        state["scores"] = {e: s for e, s in state["scores"].items() if e < epoch}
        state["best_epoch"], _ = progress(state["scores"])
        if state["best_epoch"] != recorded_best and state["best_epoch"] is not None:
            # The best weights came from an interval that is being run again;
            # take the kept checkpoint of the true best one, if still there.
            kept = os.path.join(self.directory, checkpoints.CHECKPOINT_PATTERN.format(epoch=state["best_epoch"] + 1))
            if os.path.exists(kept):
                shutil.copyfile(kept, self.best_path)
        self.state = state
        # Training seconds before this process, so that a resumed run's curve continues.
        self._seconds_before = state["scores"].get(epoch - 1, {}).get("seconds", 0.0)
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        hypotheses = self.translate(self.sentences)
        scores = evaluation.score(hypotheses, self.references)
        figures = {"val_bleu": scores["bleu"], "val_chrf": scores["chrf"]}
        if logs is not None:
            logs.update(figures)
        figures.update(updates=(epoch + 1) * self.updates_per_epoch,
                       seconds=self._seconds_before + time.perf_counter() - self._start)
        self.state["scores"][epoch] = figures
        best_epoch, waited = progress(self.state["scores"])
        if best_epoch == epoch:
            tmp = self.best_path[: -len(".weights.h5")] + ".tmp.weights.h5"
            self.model.save_weights(tmp)
            os.replace(tmp, self.best_path)
        self.state["best_epoch"] = best_epoch
        self._write_state()
        if self.patience and waited >= self.patience:
            print(f"\nEarly stopping: val_bleu has not improved for {waited} intervals "
                  f"(best {self.state['scores'][best_epoch]['val_bleu']:.2f} after interval {best_epoch + 1}).",
                  flush=True)
            self.model.stop_training = True

    def _write_state(self):
        path = os.path.join(self.directory, STATE_FILENAME)
        with atomic_open(path) as f:
            json.dump({"scores": {str(e): s for e, s in sorted(self.state["scores"].items())},
                       "best_epoch": self.state["best_epoch"]}, f, indent=2)
