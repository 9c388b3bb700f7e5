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
it also times beam decodes of the same sentences: first at the validation
that ends the second interval (the first's model is untrained, its outputs
run to the length limit), after an untimed decode of one sentence that
traces the search (`trace_seconds`, which prices the export's traces), then
again whenever the model has made BEAM_RETIME_GROWTH times the updates it
had at the last timing (the cost moves as the model trains). `beam_cost`,
the beam decode's seconds (at its outputs' own length, or the references'
where it ran longer) over the greedy one's at the references' length,
prices the work after training (`budget.TimeBudget.after_training`), and
`latest_is_best` tells it whether the last validation scored the best so
far (the model choice then has no separate best checkpoint to decode).
"""

import os
import shutil
import time

import keras

from keras_transformer.decoding import evaluation
from keras_transformer.files import atomic_path

# The beam search's cost in greedy decodes moves as the model trains, and
# one timing of it is noisy. On LibreOffice at 25 minutes (mixed_bfloat16,
# 2-core AMD EPYC): on one VM the second validation's model took 2.32-2.41
# greedy decodes where the final model's choice decodes implied about 1.6; on
# another, about 2.1 at the second validation (2.35 s against a greedy 1.1)
# and 2.44 at the fourth, where the choice's decodes implied about 2.1.
# Timing again each time the updates double keeps the figure the parts are
# priced at from a recent model, at a handful of decodes (the second
# interval's model, the fourth's, the eighth's).
BEAM_RETIME_GROWTH = 2.0


def read_state(run_dir):
    """{"scores": {interval: {"val_bleu", "val_chrf", "updates", "seconds"}}, "best_epoch": int | None}
    of a run (empty when nothing was scored yet). Intervals count from 0;
    "best_epoch" is the best interval (the record's key keeps the name Keras
    gives an interval, so that older run folders read the same); "seconds"
    are training seconds (validation included) since the run began, resumed
    runs continuing their count."""
    state = run_dir.read_validation_state()
    if state is None:
        return {"scores": {}, "best_epoch": None}
    state["scores"] = {int(interval): scores for interval, scores in state["scores"].items()}
    return state


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


def expected_decode_seconds(seconds, sources, hypotheses, references, batch_size, stretch=True):
    """The seconds a decode that took `seconds` would have taken had its
    outputs been as long as the references (in words, plus the end), each
    batch running to its longest output. A half-trained model's greedy
    outputs can run to the length limit: on LibreOffice one such
    validation decode took about 60 s where the trained model's took 5, and
    priced the test from it at twelve times what it took.
    With `stretch` False, outputs shorter than the references keep their
    seconds (only a decode that ran longer is shortened): the beam search's,
    whose outputs end short of the references in a trained model as well
    (`BleuValidation._measure_beam_cost`)."""
    def words(texts):
        return [len(text.split()) + 1 for text in texts]

    steps = decode_steps(sources, words(hypotheses), batch_size)
    ratio = decode_steps(sources, words(references), batch_size) / max(steps, 1)
    return seconds * (ratio if stretch else min(ratio, 1.0))


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
            scores (with the training seconds so far) for plotting.
        decode_batch_size: the batches `translate` decodes in (`Translator.translate`'s).
        beam_translate: as `translate`, with the beam search the model
            choice and the test use (or None: no `beam_cost`), timed at
            the second interval's end and whenever the updates have doubled
            since (BEAM_RETIME_GROWTH).
        clock: seconds (tests pass a fake one).

    After each decode it keeps its `decode_seconds`, and the
    `expected_decode_seconds` at the references' length (see the function
    of that name), which `budget.TimeBudget` prices the work after
    training from. With `beam_translate`: `beam_cost`, last measured (None
    before), at the model of `beam_updates` updates; `trace_seconds`, the
    first (tracing) beam decode of one sentence; and `beam_seconds`, what the
    last validation spent measuring them (0.0 at the others). A resumed run
    restores the first three (`budget.TimeBudget`). `latest_is_best`: whether
    the last validation scored the best val_bleu so far (the first of equal
    scores counts), which tells the budget whether the model choice will
    have a best checkpoint apart from the last to decode.
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
        self.updates_per_interval = int(updates_per_interval)
        self.decode_batch_size = int(decode_batch_size)
        self.state = None
        self.decode_seconds = self.expected_decode_seconds = None  # the last decode's, for `budget.TimeBudget`
        self.beam_translate, self.clock = beam_translate, clock
        self.beam_cost, self.beam_updates, self.trace_seconds, self.beam_seconds = None, None, None, 0.0
        self._traced = False  # whether this process has traced the beam search

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
        decode_start = self.clock()
        hypotheses = self.translate(self.sentences)
        self.decode_seconds = self.clock() - decode_start
        self.expected_decode_seconds = expected_decode_seconds(
            self.decode_seconds, self.sentences, hypotheses, self.references, self.decode_batch_size)
        self.beam_seconds = 0.0
        updates = self._updates(epoch)
        if self.beam_translate is not None and epoch >= 1 and self._beam_due(updates):
            self._measure_beam_cost(updates)
        scores = evaluation.score(hypotheses, self.references)
        figures = {"val_bleu": scores["bleu"], "val_chrf": scores["chrf"]}
        if logs is not None:
            logs.update(figures)
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

    @property
    def latest_is_best(self):
        """Whether the latest interval scored so far is the best one (False before any)."""
        scores = self.state["scores"] if self.state is not None else {}
        return bool(scores) and self.state["best_epoch"] == max(scores)

    def _beam_due(self, updates):
        """Whether the beam search is timed at this validation, of a model of
        `updates` updates: never timed yet (no `beam_updates`), or the updates grew
        BEAM_RETIME_GROWTH-fold since."""
        return updates >= BEAM_RETIME_GROWTH * (self.beam_updates or 0)

    def _measure_beam_cost(self, updates):
        """`beam_cost` from one beam decode of the sentences; before it, in a
        process that has not traced the search, an untimed one of the first
        sentence, which traces it (`trace_seconds`).
        The beam decode keeps its outputs' own length unless they ran longer
        than the references: at alpha 0.6 they end short of the references
        in the final model too, which the choice and the test decode. On
        LibreOffice's 200 validation sentences (25 minutes, float32, 2-core
        AMD EPYC family 25) the beam outputs of the model at 1,152 updates
        had 3,534 words against the references' 4,014, the final model's
        3,731; stretched to 4,014, that timing priced a beam decode at 7.3 s
        where the final model's took 5.0-5.8, and the choice and the test
        took 0.63 times their price."""
        start = self.clock()
        if not self._traced:
            self.beam_translate(self.sentences[:1])
            self._traced = True
            self.trace_seconds = self.clock() - start
        decode_start = self.clock()
        hypotheses = self.beam_translate(self.sentences)
        end = self.clock()
        beam = expected_decode_seconds(end - decode_start, self.sentences, hypotheses, self.references,
                                       self.decode_batch_size, stretch=False)
        self.beam_cost = beam / max(self.expected_decode_seconds, 1e-9)
        self.beam_updates = updates
        self.beam_seconds = end - start

    def _updates(self, interval):
        """Updates made by the end of `interval`: a whole number of intervals,
        unless a time budget ended this one early (the optimizer's count)."""
        nominal = (interval + 1) * self.updates_per_interval
        optimizer = getattr(self.model, "optimizer", None)
        if optimizer is None:
            return nominal
        accumulation = getattr(optimizer, "gradient_accumulation_steps", None) or 1
        counted = int(keras.ops.convert_to_numpy(optimizer.iterations)) // accumulation
        return counted if 0 < counted < nominal else nominal

    def _write_state(self):
        self.run_dir.write_validation_state({"scores": {str(e): s for e, s in sorted(self.state["scores"].items())},
                                             "best_epoch": self.state["best_epoch"]})
