"""BLEU while training: the `BleuValidation` callback.

After every checkpoint interval (one Keras epoch) it translates validation
sentences with the package's one `decoding.Translator` (greedy or beam
search, as the export would) and scores them with sacreBLEU and chrF
(`decoding.evaluation.score`). The scores go into the interval's logs as `val_bleu`
and `val_chrf`, so the progress bar, the History and TensorBoard show them;
it must therefore come before those callbacks that read the logs.

It keeps the weights of the interval with the best `val_bleu` as
`best.weights.h5` (strictly better replaces; the first of equal scores
stays), and with `patience` > 0 stops training after that many intervals
without a better one.

Nothing is lost when a run is killed. After every interval the score of
every interval so far goes to the run's validation record, atomically, after the best
weights. A resumed run (see `BackupAndRestore`) restarts at the interval
after its last backup; the callback drops the scores of that interval and
later ones (scored but not backed up before the kill), and recomputes the
best interval and the patience counter from the rest, so they are what an
uninterrupted run would have.

Given a beam search (`beam_translate`, as a time-budgeted run gives it),
it also times a beam decode of the same sentences, which prices the work
after training (`training.budget.after_training`): at every validation
from the one that ends the second interval (the first's model is
untrained, its outputs run to the length limit) while training goes on,
so that the price the budget stops training by is the latest model's (the
cost moves as the model trains: on everyday sentences at 17 minutes in
float32, 1.99 s at 237 updates, 4.73 s at 518). The first timing of a
process follows an untimed decode of one sentence that traces the search.
The timing (`budget.BeamTiming`) goes to the validation record, with the
seconds it took at each validation that made it (`beam_timing`).
"""

import dataclasses
import os
import shutil
import time

import keras

from keras_transformer.decoding import evaluation
from keras_transformer.files import atomic_path
from keras_transformer.training import optimization
from keras_transformer.training.budget import BeamTiming


def read_state(run_dir):
    """{"scores": {interval: {"val_bleu", "val_chrf", "updates", "seconds"}}, "best_epoch": int | None}
    of a run (empty when nothing was scored yet), and "beam": the latest
    timing of the beam search, if any (`beam_timing`); an interval that
    timed it also has "beam_seconds", what the timing took. Intervals count from 0;
    "best_epoch" is the best interval (the record's key keeps the name Keras
    gives an interval, so that older run folders read the same); "seconds"
    are training seconds (validation included) since the run began, resumed
    runs continuing their count."""
    state = run_dir.read_validation_state()
    if state is None:
        return {"scores": {}, "best_epoch": None}
    state["scores"] = {int(interval): scores for interval, scores in state["scores"].items()}
    return state


def beam_timing(state):
    """The latest `budget.BeamTiming` in a validation record (`read_state`), or None."""
    return None if state.get("beam") is None else BeamTiming(**state["beam"])


def latest_is_best(state):
    """Whether the latest interval scored in a validation record is its best
    (the model choice then has no best checkpoint apart from the last to decode)."""
    return bool(state["scores"]) and state["best_epoch"] == max(state["scores"])


def progress(scores):
    """(best interval, intervals since it) over {interval: {"val_bleu": ...}};
    the first of equal best scores counts. (None, 0) for no scores."""
    best = None
    for interval in sorted(scores):
        if best is None or scores[interval]["val_bleu"] > scores[best]["val_bleu"]:
            best = interval
    if best is None:
        return None, 0
    return best, sum(1 for interval in scores if interval > best)


def stopped_early(run_dir, patience):
    """True if the run already stopped early."""
    return bool(patience) and progress(read_state(run_dir)["scores"])[1] >= patience


def decode_steps(sources, lengths, batch_size):
    """Steps of a decode of `sources` in batches of `batch_size` in source
    length order (as `Translator.translate` batches), each batch running to
    its longest output (`lengths`, one per source)."""
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    return sum(max(lengths[i] for i in order[k:k + batch_size]) for k in range(0, len(order), batch_size))


def expected_decode_seconds(seconds, sources, hypotheses, references, batch_size):
    """The seconds a decode that took `seconds` would have taken had its
    outputs been no longer than the references (in words, plus the end),
    each batch running to its longest output. A half-trained model's outputs
    can run to the length limit (on LibreOffice one such decode took about
    60 s where the trained model's took 5); outputs shorter than the
    references keep their seconds, as a trained model's beam outputs end
    short of them too (`BleuValidation._time_beam_search`)."""
    def words(texts):
        return [len(text.split()) + 1 for text in texts]

    steps = decode_steps(sources, words(hypotheses), batch_size)
    ratio = decode_steps(sources, words(references), batch_size) / max(steps, 1)
    return seconds * min(ratio, 1.0)


class BleuValidation(keras.callbacks.Callback):
    """Scores validation translations after every checkpoint interval; keeps the best weights; stops early.

    Keras calls an interval an epoch: `on_epoch_end(epoch)` ends interval `epoch`.

    Args:
        run_dir: the `run_dir.RunDir` (of this worker) that names the best
            weights and the validation record.
        sentences, references: validation sources and references (lists of str).
        translate: a function list of str -> list of str, called with the
            model's current weights (e.g. `lambda texts:
            translator.translate(texts).best` of a `decoding.Translator`).
        patience: stop after this many intervals without a better val_bleu (0: never).
        updates_per_interval: optimizer updates in one interval, recorded with the
            scores (with the training seconds so far) for plotting; None where
            intervals end by the clock (a time budget): the optimizer's count.
        decode_batch_size: the batches `translate` decodes in (`Translator.translate`'s).
        beam_translate: as `translate`, with the beam search the model
            choice and the test use (or None: not timed), timed at every
            interval's end from the second's while training goes on.
        clock: seconds (tests pass a fake one).
    """

    def __init__(self, run_dir, sentences, references, translate, patience=0, updates_per_interval=1,
                 decode_batch_size=64, beam_translate=None, clock=time.perf_counter):
        super().__init__()
        if len(sentences) != len(references):
            raise ValueError(f"{len(sentences)} validation sentences but {len(references)} references.")
        os.makedirs(run_dir.checkpoint_dir, exist_ok=True)
        self.run_dir = run_dir
        self.sentences, self.references = list(sentences), list(references)
        self.translate = translate
        self.patience = int(patience)
        self.updates_per_interval = None if updates_per_interval is None else int(updates_per_interval)
        self.decode_batch_size = int(decode_batch_size)
        self.state = None
        self.beam_translate, self.clock = beam_translate, clock
        self._trace_seconds = None  # this process's trace of the beam search, once made

    def on_epoch_begin(self, epoch, logs=None):
        if self.state is not None:
            return
        # First interval of this process: a fresh run (interval 0) or a resumed one.
        state = read_state(self.run_dir)
        recorded_best = state["best_epoch"]
        state["scores"] = {e: s for e, s in state["scores"].items() if e < epoch}
        state["best_epoch"], _ = progress(state["scores"])
        if state["best_epoch"] != recorded_best and state["best_epoch"] is not None:
            # The best weights came from an interval that is being run again;
            # take the kept checkpoint of the true best one, if still there.
            kept = self.run_dir.checkpoint_path(state["best_epoch"])
            if os.path.exists(kept):
                with atomic_path(self.run_dir.best_weights_path) as tmp:
                    shutil.copyfile(kept, tmp)
        self.state = state
        # Training seconds before this process, so that a resumed run's curve continues.
        self._seconds_before = state["scores"].get(epoch - 1, {}).get("seconds", 0.0)
        self._start = self.clock()

    def on_epoch_end(self, epoch, logs=None):
        hypotheses = self.translate(self.sentences)
        updates = self._updates(epoch)
        scores = evaluation.score(hypotheses, self.references)
        figures = {"val_bleu": scores["bleu"], "val_chrf": scores["chrf"]}
        if logs is not None:
            logs.update(figures)
        if self.beam_translate is not None and epoch >= 1 and self._training_goes_on(epoch):
            figures["beam_seconds"] = self._time_beam_search(updates)
        figures.update(updates=updates, seconds=self._seconds_before + self.clock() - self._start)
        self.state["scores"][epoch] = figures
        best, waited = progress(self.state["scores"])
        if best == epoch:
            with atomic_path(self.run_dir.best_weights_path) as tmp:
                self.model.save_weights(tmp)
        self.state["best_epoch"] = best
        self._write_state()
        if self.patience and waited >= self.patience:
            print(f"\nEarly stopping: val_bleu has not improved for {waited} intervals "
                  f"(best {self.state['scores'][best]['val_bleu']:.2f} after interval {best + 1}).",
                  flush=True)
            self.model.stop_training = True

    def _training_goes_on(self, epoch):
        """Whether training continues after interval `epoch`: it is not the
        last of `fit`'s, and no callback has stopped training (`True`; a
        time budget ends each interval with a value of its own)."""
        return self.model.stop_training is not True and epoch + 1 < self.params.get("epochs", epoch + 2)

    def _time_beam_search(self, updates):
        """Times one beam decode of the sentences into the state's "beam"
        (`budget.BeamTiming`), after an untimed decode of the first sentence
        in a process that has not traced the search (its seconds are the
        timing's `trace_seconds`). Returns the seconds all this took.
        The decode keeps its outputs' own length unless they ran longer than
        the references: at alpha 0.6 they end short of the references in the
        final model too, which the choice and the test decode (LibreOffice's
        200 validation sentences: 3,534 words at 1,152 updates, 3,731 in the
        final model, against the references' 4,014)."""
        start = self.clock()
        if self._trace_seconds is None:
            self.beam_translate(self.sentences[:1])
            self._trace_seconds = self.clock() - start
        decode_start = self.clock()
        hypotheses = self.beam_translate(self.sentences)
        end = self.clock()
        seconds = expected_decode_seconds(end - decode_start, self.sentences, hypotheses, self.references,
                                          self.decode_batch_size)
        self.state["beam"] = dataclasses.asdict(BeamTiming(seconds, len(self.sentences), self._trace_seconds,
                                                           updates))
        return end - start

    def _updates(self, interval):
        """Updates made by the end of `interval`: the optimizer's count where
        the clock ends intervals, else a whole number of intervals (unless
        the run stopped within one)."""
        optimizer = getattr(self.model, "optimizer", None)
        if optimizer is None:
            return (interval + 1) * (self.updates_per_interval or 1)
        counted = optimization.updates_made(optimizer)
        if self.updates_per_interval is None:
            return counted
        nominal = (interval + 1) * self.updates_per_interval
        return counted if 0 < counted < nominal else nominal

    def _write_state(self):
        beam = {"beam": self.state["beam"]} if "beam" in self.state else {}
        self.run_dir.write_validation_state({"scores": {str(e): s for e, s in sorted(self.state["scores"].items())},
                                             "best_epoch": self.state["best_epoch"], **beam})
