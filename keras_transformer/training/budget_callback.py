"""`TimeBudget`: the Keras callback that is a budgeted run's training clock (see `training.budget`)."""

import dataclasses
import sys
import time

import keras

from keras_transformer.training import bleu_validation, budget


class EndOfInterval:
    """`model.stop_training` when `TimeBudget` ends an interval: true, so Keras
    ends the epoch; not `True`, so the clock sees whether another callback
    (early stopping, TerminateOnNaN), before or after it, stopped the run."""

    def __bool__(self):
        return True


END_OF_INTERVAL = EndOfInterval()


class TimeBudget(keras.callbacks.Callback):
    """Counts the seconds of updates, hands their share of training's seconds
    to the schedule, ends a checkpoint interval at every `budget.INTERVALS`-th
    of training's time and training when it is spent.

    Training's seconds run from one update's end to the next (an interval's
    first from the interval's start), so a slow validation or checkpoint does
    not eat the cool-down. The record (`budget.Record` of `run_dir`) is saved
    every `save_every` seconds and at each interval's end: a run killed and
    started again continues the same budget and curve. `progress` is the
    schedule's variable (`optimization.ClockCooldown`) or None;
    `process_start`, the `clock()` at which this process began spending the
    budget (default: training's start); `clock`, monotonic seconds (tests
    pass a fake one); `verbose`, a progress line and a line per interval.
    """

    def __init__(self, run_dir, progress=None, batches_per_update=1, process_start=None, clock=time.monotonic,
                 save_every=5.0, verbose=True):
        super().__init__()
        self.run_dir, self.progress, self.batches_per_update = run_dir, progress, int(batches_per_update)
        self.process_start, self.clock, self.save_every, self.verbose = process_start, clock, save_every, verbose

    def on_train_begin(self, logs=None):
        self.record = budget.load(self.run_dir)
        self.start = self.clock() if self.process_start is None else self.process_start
        self.read_validations(bleu_validation.read_state(self.run_dir))
        if self.progress is not None:  # a resumed run's first update continues its curve
            self.progress.assign(budget.progress(self.record, self.after))
        self.last = self.saved = self.clock()  # last: the last update's end, or the interval's start
        self.interval, self.batches, self.logs, self.validating, self.tty = 0, 0, None, False, sys.stdout.isatty()
        self.shown = (-1, self.clock())  # the tenth of training's time and the clock of the last progress line

    def on_epoch_begin(self, epoch, logs=None):
        state = bleu_validation.read_state(self.run_dir)
        self.end_validation(state)
        self.interval = epoch
        # A resumed run runs its interval `epoch` again, and its validations from there.
        self.note(validations=self.record.validations[:epoch])
        self.read_validations(state)
        self.last = self.clock()
        self.save()

    def on_train_batch_end(self, batch, logs=None):
        now = self.clock()
        self.note(training=self.record.training + now - self.last, spent=self.spent(now))
        self.last = now
        self.batches += 1
        if self.batches % self.batches_per_update:
            return
        self.note(updates=self.record.updates + 1)
        share = budget.progress(self.record, self.after)
        if self.progress is not None:
            self.progress.assign(share)
        if share >= 1.0:
            self.model.stop_training = True
            self.note(stopped=True)
        elif share >= (self.interval + 1) / budget.INTERVALS and not self.model.stop_training:
            self.model.stop_training = END_OF_INTERVAL
        self.show(share, (logs or {}).get("loss"), now)
        if now - self.saved >= self.save_every:
            self.save()

    def on_epoch_end(self, epoch, logs=None):
        if self.model.stop_training is END_OF_INTERVAL:  # only this callback ended the interval
            self.model.stop_training = False
        # The logs are shown at the next interval's start, once every callback has added its figures.
        self.validating, self.logs = True, logs

    def on_train_end(self, logs=None):
        self.end_validation(bleu_validation.read_state(self.run_dir))
        self.save()

    def end_validation(self, state):
        """Records, once, the validation and checkpoints that ended the last
        interval: from its last update to now, less the beam timing in the
        validation record `state`."""
        if not self.validating:
            return
        now, self.validating = self.clock(), False
        seconds = now - self.last - state["scores"].get(self.interval, {}).get("beam_seconds", 0.0)
        self.note(validations=self.record.validations + (seconds,), spent=self.spent(now))
        if self.verbose:
            figures = "  ".join(f"{name} {value:.4g}" for name, value in sorted((self.logs or {}).items())
                                if isinstance(value, float))
            print(("\n" if self.tty else "") + f"Interval {self.interval + 1}/{budget.INTERVALS}: "
                  f"{self.record.updates:,} updates, {self.record.training / 60.0:.1f} minutes of training  {figures}",
                  flush=True)

    def read_validations(self, state):
        """Prices the work after training from the validation record `state`."""
        beam = bleu_validation.beam_timing(state)
        self.after = budget.after_training(self.record, beam, bleu_validation.latest_is_best(state))
        self.note(priced=self.after if beam else {})

    def show(self, share, loss, now):  # on a terminal, rewritten every second; in a log, one per tenth
        if not self.verbose or (int(10 * share) <= self.shown[0] and not (self.tty and now - self.shown[1] >= 1.0)):
            return
        self.shown = (int(10 * share), now)
        left = (1.0 - min(share, 1.0)) * self.record.training / max(share, 1e-9) / 60.0
        line = (f"Training: {min(share, 1.0):4.0%} of its time, {left:.1f} minutes left, {self.record.updates:,} "
                f"updates" + ("" if loss is None else f", loss {float(loss):.4f}"))
        print(f"\r{line}" if self.tty else line, end="" if self.tty else "\n", flush=True)

    def note(self, **changes):
        self.record = dataclasses.replace(self.record, **changes)

    def spent(self, now):
        return self.record.earlier + now - self.start

    def save(self):
        self.saved = self.clock()
        budget.save(self.run_dir, self.record)
