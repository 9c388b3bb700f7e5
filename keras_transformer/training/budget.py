"""Training to a time budget (`--time-budget MINUTES`): the run fits its schedule to the minutes it has.

Before training, `probe_seconds_per_update` times updates of the run's
model on the run's own batches, as the run will train; priced at
RUN_OVER_PROBE times those seconds (runs make their updates slower than
their probes time them), `plan` turns the budget into updates: the run's
length (`steps`, an upper bound), its checkpoint interval and its warm-up. During training the `TimeBudget`
callback measures the real time per update (the run's mean, or its latest
updates' if slower) and per validation, refines the number of updates the
rest of the budget allows, moves the end of the
learning-rate schedule there (`optimization.BudgetCooldown`: the rate reaches zero
exactly at the last update, as Li et al. found best at every budget), and
stops training when the budget, less the model choice still to come, is
spent. After the first interval, a speed more than REVISION_TOLERANCE off
the plan's revises the plan and its warm-up (`TimeBudget.revise`). A stop
in the middle of an interval still ends it with a checkpoint and a
validation (Keras ends the epoch), so the last interval is as long as the
time left allows: the budget is spent on updates, not left unused.

What the budget covers: the whole command, from the process's start
(`process_start`) to the export. Training gets what is left once the work
after it is priced (`TimeBudget.after_training`): the model choice and the
test decode from this run's own validation decodes (the median of those
after the first interval, in seconds per sentence at the references'
length, times the beam search's cost in greedy
decodes, which the validation measures as the model trains:
`BleuValidation.beam_cost`, or `BEAM_COST` before it has), the export from
the validation's trace of the beam search (EXPORT_TRACE_COST times
`BleuValidation.trace_seconds`, or `EXPORT_SECONDS` before it has). The time spent is recorded in the run
folder after every interval (`RunDir.budget_path`), so a run killed and
started again continues the same budget; the recipe adds what each part
after training took (`record_part`).

References:
    Li, Yumer and Ramanan, "Budgeted Training: Rethinking Deep Neural Network
    Training Under Resource Constraints", ICLR 2020 (linear decay to zero at
    the budget).
"""

import collections
import dataclasses
import math
import os
import statistics
import time

import keras
from keras import ops

from keras_transformer.config import PAPER_WARMUP_STEPS


# A plan aims at this many checkpoint intervals: a learning curve of that
# many points, with each validation pass a small share of the budget.
TARGET_INTERVALS = 6
# The first checkpoint needs at least this many updates.
MIN_INTERVAL = 10
# The learning rate's linear cool-down to zero takes the last COOLDOWN_SHARE
# of the updates the run makes, and the warm-up at most the updates before
# it (see training/auto_config.py for the warm-up's rate). Hägele et al.
# (2024) cooled down over the last 20% of long runs; at a few hundred to a
# thousand updates half the run scored as high or higher on dev (docs/training.md):
# LibreOffice's short pairs 38.11 against 35.43 at 17 minutes, 5,000 of its
# pairs 20.39 against 20.50 and LibreOffice at 25 minutes 30.44 against
# 30.50 (ties); a decay over the whole run scored 31.14 on the short pairs.
COOLDOWN_SHARE = 0.5
WARMUP_SHARE = 1.0 - COOLDOWN_SHARE
# After the first checkpoint interval the run knows its real speed; when its
# mean seconds per update differ from the plan's by more than this share, the
# plan's estimates are revised (`TimeBudget.revise`): the updates, the epochs
# and a planned warm-up. The probe, 16 updates, moved by 15% between two runs
# of one command on one machine (0.46 and 0.53 s on LibreOffice at 25 minutes,
# mixed_bfloat16, 2-core AMD EPYC), and budgeted runs made their updates 4%
# faster to 27% slower than probed (RUN_OVER_PROBE).
REVISION_TOLERANCE = 0.10
# Share of the budget first set aside for validation and the model choice;
# the callback replaces it by what they are measured to take.
FIRST_OVERHEAD_SHARE = 0.12
# The model choice decodes the validation sentences once per candidate with
# beam search, and the test decodes the test sentences with it; validation
# decodes greedily. A beam-4 decode of a sentence at the paper's alpha 0.6
# costs about this many greedy ones, its trace and scoring included, until
# the run has measured its own (`BleuValidation.beam_cost`, from the second
# validation on): priced at 2.0, the choice and the test of five budgeted runs
# (LibreOffice at 25 and 50 minutes, its medium and short pairs at 17; 2-core
# AMD EPYC) took 0.94-1.57 and 1.0-1.31 times their price, 1.25 in the
# median. Priced at 2.5, later runs' took 0.61-1.0 times it (mixed_bfloat16
# 0.61-0.82, float32 0.93-1.0): one constant does not hold across precisions.
BEAM_COST = 2.5
# At the larger alphas the choice tries, beam search runs longer before its
# finished hypotheses beat the alive ones: on LibreOffice's 200 validation
# sentences (its 25-minute run, one Translator) 0.8, 1.0 and 1.2 took 1.28,
# 1.42 and 1.69 times 0.6's seconds. A decode of a further alpha, and the test
# of a run that chooses its alpha (at whichever it keeps), are priced at this
# many times 0.6's.
LONG_ALPHA_COST = 1.5
# The same decodes, one alpha to the next (0.6 to 0.8, 0.8 to 1.0, 1.0 to 1.2):
# 1.28, 1.10 and 1.20 times the seconds. Once the model choice has measured a
# beam decode, the next alpha's decode, and the test at that alpha, are priced
# at this many times its seconds per sentence (`decode_fits`).
ALPHA_STEP_COST = 1.3
# The SavedModel export (tracing the serving signatures and writing them):
# 10-19 s for the small preset on a 2-core AMD EPYC with AVX-512 bf16
# (LibreOffice runs of 17 and 25 minutes). The price until the run has traced
# its beam search (`BleuValidation.trace_seconds`).
EXPORT_SECONDS = 20.0
# The export traces three serving signatures around the beam search. In a
# budgeted run it took 3.6 times the validation's first, tracing, beam decode
# of one sentence (LibreOffice at 25 minutes, mixed_bfloat16, 2-core AMD EPYC
# family 26: 7.4 s against 2.05). A process's first beam trace carries
# one-off costs that a run's validation has already paid: alone, with a
# fresh small model, it took 9.8 s and the export after it 15.8.
EXPORT_TRACE_COST = 3.6
# What a `BleuValidation` measures of the beam search, kept in budget.json so
# that a resumed run keeps it: its cost in greedy decodes, the updates of the
# model it was measured on, and the seconds of its first (tracing) decode.
BEAM_TIMING = ("beam_cost", "beam_updates", "trace_seconds")
# The time left is priced at the run's mean seconds per update, or at its last
# RECENT_UPDATES' mean when they ran slower: a machine shared with other work
# can slow down mid-run (these 2-core VMs showed 4-11% steal time), and the
# learning rate's end, placed at the updates the time left allows, should be
# where training will stop, not past it.
RECENT_UPDATES = 50
# The probe (`probe_seconds_per_update`) times PROBE_UPDATES updates of `fit`
# on the run's own batches after PROBE_UNTIMED untimed ones (the first two
# trace the train step; from the third batch shape on, Keras' relaxed
# shapes need no new trace). On a 2-core VM the same updates' mean moved
# by up to 14% between two 60-update timings in one process (0.50 and
# 0.57 s on LibreOffice, mixed_bfloat16), so the probe times more than the
# handful it used to (6). LibreOffice's real batches timed as a synthetic
# batch of their mean length did (0.49 and 0.50 s): the corpus' shapes are
# timed as they are rather than modelled.
PROBE_UNTIMED = 4
PROBE_UPDATES = 16
# A budgeted run makes its updates slower than its probe timed them.
# Fifteen budgeted runs since the probe has timed 16 updates (2-core AMD
# EPYC VMs of CPU family 25 and 26; LibreOffice at 25 and 50 minutes, its
# short and medium pairs and everyday sentences at 17; fourteen in
# mixed_bfloat16, one in float32; CHANGELOG.md) made their updates at
# 0.96-1.27 times the probe's seconds, thirteen of them slower: 1.097 in
# the median, 1.096 without the run at 1.27, which stalled on tf.data's
# autotuning (since turned off, `pipeline.make_batches`). The constant
# rounds that down to 1.09. The cause is not found. It is not
# what the run adds around an update: in one process, 144 updates a
# timing on LibreOffice (mixed_bfloat16), the probe's batches took
# 0.48-0.54 s an update (ten timings, 0.51 in the mean), the file reader's
# 0.50-0.53 (four), with the run's callbacks and progress bar 0.51 (two),
# and through the run's `distributed_batches` as well 0.50-0.51 (two). So
# the recipe and the plan price an update at this many times the probe's
# seconds, and the revision after the first interval (REVISION_TOLERANCE)
# catches what is left.
RUN_OVER_PROBE = 1.09
# The parts of a budgeted command, in order (`budget.json`'s "parts").
PARTS = ("training", "choice", "test", "export")


@dataclasses.dataclass(frozen=True)
class Plan:
    """How a budget is spent, as planned before training."""

    seconds_per_update: float
    updates: int  # planned updates
    interval: int  # updates per checkpoint interval
    warmup: int  # warm-up updates
    max_updates: int  # `steps`: a bound that the time, not the count, should reach
    # After training: the sentences the test decodes, and the export's seconds.
    test_sentences: int = 0
    export_seconds: float = 0.0
    # Beam decodes of the validation sentences the model choice makes: one per
    # candidate (`model_choice.CANDIDATES`) at the run's alpha, and one per
    # further length penalty it tries (each LONG_ALPHA_COST).
    choice_decodes: int = 3
    alpha_decodes: int = 0
    # The warm-up whose climb the planned one follows (`warmup_for`), or 0
    # when the user set the warm-up or the rate (then it is not revised).
    reference_warmup: int = 0
    # Passes over the corpus the planned updates make (0: not estimated).
    epochs: float = 0.0


def warmup_for(updates, reference, share=WARMUP_SHARE):
    """The warm-up of a run of `updates` updates: the `share` of them before
    the cool-down, at most `reference`, whose climb it follows (`climb_scale`)."""
    return int(min(reference, max(1, round(share * updates))))


def climb_scale(warmup, reference):
    """The learning-rate scale under which a warm-up of `warmup` updates
    climbs as one of `reference` updates does: the paper's schedule is
    d_model^-0.5 * step * warmup^-1.5 during warm-up, so the scale is
    (warmup / reference)^1.5 (1 for a warm-up at least the reference's)."""
    return min(1.0, (warmup / reference) ** 1.5)


def plan(budget_seconds, spent_seconds, seconds_per_update, warmup_share=WARMUP_SHARE, max_warmup=PAPER_WARMUP_STEPS,
         test_sentences=0, export_seconds=0.0, choice_decodes=3, alpha_decodes=0):
    """The `Plan` for the budget left, the export's seconds set aside. ValueError
    if it does not reach the first checkpoint."""
    left = budget_seconds - spent_seconds - export_seconds
    updates = int(left * (1.0 - FIRST_OVERHEAD_SHARE) / seconds_per_update)
    if updates < MIN_INTERVAL:
        needed = (MIN_INTERVAL * seconds_per_update / (1.0 - FIRST_OVERHEAD_SHARE) + spent_seconds
                  + export_seconds) / 60.0
        raise ValueError(
            f"--time-budget {budget_seconds / 60.0:g} minutes leaves time for {max(updates, 0)} updates at "
            f"{seconds_per_update:.2f} s per update on this machine; the first checkpoint needs "
            f"{MIN_INTERVAL}. Give at least {math.ceil(needed * 10) / 10:g} minutes.")
    interval = max(MIN_INTERVAL, round(updates / TARGET_INTERVALS))
    warmup = warmup_for(updates, max_warmup, warmup_share)
    # Room for the machine to run faster than probed; the budget stops the run first.
    max_updates = interval * math.ceil(3 * updates / interval)
    return Plan(float(seconds_per_update), updates, interval, warmup, max_updates, int(test_sentences),
                float(export_seconds), int(choice_decodes), int(alpha_decodes), int(max_warmup))


def with_interval(plan, interval):
    """`plan` with the checkpoint interval a user set."""
    interval = int(interval)
    return dataclasses.replace(plan, interval=interval, max_updates=interval * math.ceil(3 * plan.updates / interval))


def probe_seconds_per_update(model, batches, updates=PROBE_UPDATES, untimed=PROBE_UNTIMED, clock=time.perf_counter):
    """Seconds per update of a compiled `model` trained by `fit` on `batches`
    (the run's own repeating tf.data pipeline), timed as `TimeBudget` times a
    run: from one update's end to the next, so the input pipeline and the fit
    loop count. The first `untimed` updates are left out (they trace the
    train step for the first batch shapes and fill the shuffle buffers).
    The model's weights and optimizer state change."""
    if untimed < 1 or updates < 1:
        raise ValueError(f"The probe needs at least one untimed and one timed update; got untimed={untimed}, "
                         f"updates={updates}.")
    ends = []

    class Clock(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            ends.append(clock())

    model.fit(batches, epochs=1, steps_per_epoch=untimed + updates, shuffle=False, verbose=0,
              callbacks=[Clock()])
    return (ends[-1] - ends[untimed - 1]) / updates


def process_start(clock=time.monotonic):
    """The `clock()` reading at which this process started, so that the
    interpreter's start and the imports count against the budget (Linux:
    /proc; elsewhere the time of this call)."""
    try:
        with open("/proc/self/stat") as f:
            started_ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22: start time since boot
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        age = uptime - started_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        age = 0.0
    return clock() - max(0.0, age)


def record_part(run_dir, part, spent_seconds, command_seconds=None):
    """Adds the seconds a part after training took to the run's budget record
    (and, with `command_seconds`, the whole command's)."""
    record = run_dir.read_budget() or {}
    parts = record.get("parts", {})
    parts[part] = {**parts.get(part, {}), "spent": float(spent_seconds)}
    update = {"parts": parts}
    if command_seconds is not None:
        update["command_seconds"] = float(command_seconds)
    run_dir.write_budget(update)


def choice_units(choice_decodes, alpha_decodes):
    """The model choice's price in beam decodes of the validation sentences
    at alpha 0.6: its candidates' and its further alphas' (each LONG_ALPHA_COST)."""
    return choice_decodes + LONG_ALPHA_COST * alpha_decodes


def decode_fits(record, seconds_since_training, seconds_per_sentence=None, sentences=None):
    """Whether a budgeted run (its budget `record`) has time for one more of
    the model choice's decodes at a further alpha, and then for the test at
    that alpha (which it may choose) and the export's planned seconds.
    With `seconds_per_sentence`, the model choice's last beam decode of its
    `sentences` validation sentences as measured, both decodes are priced
    from it, ALPHA_STEP_COST times its seconds per sentence; without it, as
    the plan priced them (`TimeBudget.after_training`).
    `seconds_since_training`: what the command has spent since training
    ended. True when training ended before a validation priced the choice."""
    parts = record.get("parts", {})
    if "planned" not in parts.get("choice", {}):
        return True
    plan = record["plan"]
    if seconds_per_sentence is None:
        candidates = parts["choice"].get("candidates", plan["choice_decodes"])
        decode = parts["choice"]["planned"] / choice_units(candidates, plan.get("alpha_decodes", 0))
        decode *= LONG_ALPHA_COST
        test = parts["test"]["planned"]
    else:
        decode = ALPHA_STEP_COST * seconds_per_sentence * sentences
        test = ALPHA_STEP_COST * seconds_per_sentence * plan["test_sentences"]
    spent = parts["training"]["spent"] + seconds_since_training
    return spent + decode + test + parts["export"]["planned"] <= record["budget_minutes"] * 60.0


def describe_parts(record):
    """One line: the budget, the command's minutes, and each part's planned and spent minutes."""
    parts = record.get("parts", {})
    said = ", ".join(f"{part} {parts[part]['spent'] / 60.0:.1f}"
                     + (f" (planned {parts[part]['planned'] / 60.0:.1f})" if "planned" in parts[part] else "")
                     for part in PARTS if "spent" in parts.get(part, {}))
    return (f"Time budget: {record['budget_minutes']:g} minutes; the command took "
            f"{record.get('command_seconds', 0.0) / 60.0:.1f}: {said}")


class TimeBudget(keras.callbacks.Callback):
    """Ends training when the budget is spent, and fits the schedule's end to it.

    Args:
        run_dir: the `RunDir` whose budget record it keeps.
        budget_seconds: the whole budget.
        plan: the `Plan` made before training.
        total_updates: the `BudgetCooldown`'s variable, or None.
        warmup_steps, rate_scale: the `TransformerSchedule`'s variables,
            which the revision after the first interval sets (`revise`), or None.
        batches_per_update: gradient accumulation's batches per update.
        clock: seconds, monotonic (tests pass a fake one).
        save_every: seconds between writes of the time spent.
        process_start: the `clock()` at which this process began spending
            the budget (default: when training begins), so that its set-up
            (the interpreter, the recipe's probe, the vocabulary) counts.
        validation: the `BleuValidation` callback, whose decode times at
            the references' length (`expected_decode_seconds`, over its
            sentences; `priced_decode`) price the model choice and the test
            decode; without
            it, the whole validation pass stands for a greedy decode of the
            choice's sentences.

    Place it after `BackupAndRestore`, so that a resumed run's update count
    is restored when training begins. The record (`RunDir.budget_path`):
    budget_minutes, spent_seconds, expected_updates (the updates training is
    expected to make, where the learning rate reaches zero: the plan's at
    first, then the latest estimate from the measured speed, never beyond
    the plan's `max_updates`; the plan itself stays as it was, under
    "plan"), made_updates,
    seconds_per_update (the mean) and validation_seconds (the longest of
    this process's validations, checkpoints and backups after its first),
    validations (each of this process's, written when training ends: its
    seconds, and of them the validation loss pass's, "loss", and the BLEU
    decode's, "decode"; the rest is the checkpoint, the backup and what
    Keras does before the loss pass, such as replacing the last pass's
    validation iterator; and "beam": its timing of the beam search, if it
    made one, left out of its seconds), beam_cost, beam_updates and
    trace_seconds (the validation's latest timing of the beam search,
    BEAM_TIMING, kept for a resumed run), stopped:
    whether the budget ended training, revision: the plan revised after
    the first interval (`revise`), and parts: each part's
    planned seconds (training, choice, test, export; the recipe adds what
    each took, `record_part`), and the choice's candidates priced
    (`choice_candidates`).
    """

    def __init__(self, run_dir, budget_seconds, plan, total_updates=None, batches_per_update=1,
                 clock=time.monotonic, save_every=30.0, process_start=None, validation=None,
                 warmup_steps=None, rate_scale=None):
        super().__init__()
        self.run_dir = run_dir
        self.budget_seconds = float(budget_seconds)
        self.plan = plan
        self.total_updates = total_updates
        self.warmup_steps, self.rate_scale = warmup_steps, rate_scale
        self.batches_per_update = int(batches_per_update)
        self.clock = clock
        self.save_every = float(save_every)
        self.process_start = process_start
        self.validation = validation

    def on_train_begin(self, logs=None):
        record = self.run_dir.read_budget() or {}
        self.spent_before = float(record.get("spent_seconds", 0.0))
        made = int(ops.convert_to_numpy(self.model.optimizer.iterations)) // self.batches_per_update
        self.record = {"budget_minutes": self.budget_seconds / 60.0, "expected_updates": self.plan.updates,
                       "made_updates": made, "stopped": False,
                       "seconds_per_update": float(record.get("seconds_per_update", self.plan.seconds_per_update)),
                       "validation_seconds": record.get("validation_seconds")}
        for key in BEAM_TIMING:
            if key in record and self.validation is not None:  # measured before it was resumed
                self.record[key] = record[key]
                setattr(self.validation, key, record[key])
        if "revision" in record:  # made by this run before it was resumed: the warm-up stays revised
            self.record["revision"] = record["revision"]
            self.apply_warmup(record["revision"])
        self.saved = self.clock()
        self.start = self.saved if self.process_start is None else self.process_start
        self.batch_end = None  # when the last batch of this process ended
        self.validations = []  # seconds of this process's validations, checkpoints and backups
        self.breakdowns = []  # of each: {"loss": its loss pass's seconds, "decode": its BLEU decode's}
        self.loss_start = self.loss_seconds = None
        self.validated_updates = made  # the updates of the model the last validation decoded
        self.decodes = []  # `expected_decode_seconds` of this process's validations after the first interval
        self.training_seconds, self.timed_batches, self.batches = 0.0, 0, 0
        self.recent = collections.deque(maxlen=RECENT_UPDATES * self.batches_per_update)  # timed batches' seconds
        self.record["parts"] = self.planned_parts()  # even if training stops before its first validation
        if self.too_little_left():  # a resumed run whose budget is spent
            self.stop()

    def spent(self):
        return self.spent_before + self.clock() - self.start

    def _save(self):
        self.record["spent_seconds"] = self.spent()
        self.saved = self.clock()
        self.run_dir.write_budget(self.record)

    def stop(self):
        """Ends training here: these are all the updates, and the schedule's end is here."""
        self.model.stop_training = True
        self.record["stopped"] = True
        self.record["expected_updates"] = self.record["made_updates"]
        if self.total_updates is not None:
            self.total_updates.assign(float(max(1, self.record["made_updates"])))

    def pace(self):
        """Seconds per update to price the time left at: the run's mean, or its
        last RECENT_UPDATES updates' mean when that is slower."""
        mean = self.record["seconds_per_update"]
        if len(self.recent) < self.recent.maxlen:
            return mean
        return max(mean, self.batches_per_update * sum(self.recent) / len(self.recent))

    def too_little_left(self):
        """Whether the time left is not worth another interval (`worth_starting`)."""
        return not self.worth_starting(int(self.left_for_training() / self.pace()))

    def worth_starting(self, updates):
        """Whether an interval of `updates` updates is worth its validation: a
        last, shorter interval is started only when its updates take at least
        as long as the validation that ends it, and number at least MIN_INTERVAL."""
        validation = self.record["validation_seconds"] or 0.0
        return updates >= max(MIN_INTERVAL, validation / self.pace())

    def after_training(self):
        """{part: seconds} the parts after training will take: the model
        choice (`choice_candidates` beam decodes of the validation
        sentences, and its `alpha_decodes` at LONG_ALPHA_COST) and the test
        (one of the test sentences, at LONG_ALPHA_COST when the choice tries
        alphas), each sentence priced at the validation decodes' seconds per
        sentence (`priced_decode`) times the beam search's cost
        (`beam_cost`), and the export (`export_seconds`)."""
        decode, sentences = self.record["validation_seconds"], None
        if self.validation is not None and self.validation.expected_decode_seconds is not None:
            decode, sentences = self.priced_decode(), len(self.validation.sentences)
        beam = decode * self.beam_cost()  # one beam decode of the validation sentences at alpha 0.6
        longer = LONG_ALPHA_COST if self.plan.alpha_decodes else 1.0
        test = beam * longer * self.plan.test_sentences / sentences if sentences else 0.0
        return {"choice": beam * choice_units(self.choice_candidates(), self.plan.alpha_decodes),
                "test": test, "export": self.export_seconds()}

    def choice_candidates(self):
        """The candidates the model choice would decode were training to end
        at the last validation: the plan's, less "best" while that validation
        scored the best so far (the choice leaves out a best checkpoint that is
        the last one, `model_choice.candidates`). With the learning rate
        cooled to zero, the last interval scores the best in most runs: it
        did in both of LibreOffice's 25-minute runs of the 2-core AMD EPYC
        family 25 VM (mixed_bfloat16 and float32), whose choices decoded two
        candidates where three were priced."""
        latest_is_best = self.validation is not None and self.validation.latest_is_best
        return self.plan.choice_decodes - (1 if latest_is_best and self.plan.choice_decodes > 1 else 0)

    def priced_decode(self):
        """The seconds of a greedy decode of the validation sentences with
        outputs as long as the references, as a trained model's are
        (`expected_decode_seconds`): the median of this process's validation
        decodes after the first interval, or the last decode before those.
        One decode can stray: on LibreOffice in float32 the one before the
        run's stop took 1.9 s where the others after the first took 1.2-1.4;
        priced from it, the choice and the test left training 24 s less than
        the last decode (1.4 s) gave it, and the command ended 2.8% under its
        budget."""
        if self.decodes:
            return statistics.median(self.decodes)
        return self.validation.expected_decode_seconds

    def export_seconds(self):
        """The export's price: EXPORT_TRACE_COST times the validation's trace
        of the beam search once measured, else the plan's (none without an export)."""
        trace = None if self.validation is None else self.validation.trace_seconds
        if not self.plan.export_seconds or trace is None:
            return self.plan.export_seconds
        return EXPORT_TRACE_COST * trace

    def beam_cost(self):
        """A beam decode's seconds in greedy ones: as the validation measured
        it (`BleuValidation.beam_cost`), or BEAM_COST before it has."""
        measured = None if self.validation is None else self.validation.beam_cost
        return BEAM_COST if measured is None else measured

    def left_for_training(self):
        """Seconds left for updates: training's planned share of the budget
        (`planned_parts`: the budget less the parts after training) less the
        time spent and the validation that ends the interval in progress.
        Records the parts' plan as it stands."""
        self.record["parts"] = self.planned_parts()
        return (self.record["parts"]["training"]["planned"] - self.spent()
                - (self.record["validation_seconds"] or 0.0))

    def planned_parts(self):
        """{part: {"planned": seconds}} for every part in PARTS. Until a
        validation after the first interval's is measured (by a
        `BleuValidation`, whose decodes price the choice and the test), the
        plan's guess:
        the export, and training the budget less FIRST_OVERHEAD_SHARE (which
        holds the validations, the choice and the test, so these two have no
        figure of their own yet). The first interval's model is too raw to
        price a trained one's decodes by: on LibreOffice at 25 minutes its
        outputs ("In der Formel =A19999...") priced the work after training
        at about 500 s, where the run's later validations priced it at 204."""
        raw = self.validation is not None and self.validated_updates <= self.plan.interval
        if self.record["validation_seconds"] is None or raw:
            return {"training": {"planned": self.budget_seconds * (1.0 - FIRST_OVERHEAD_SHARE)
                                 - self.plan.export_seconds},
                    "choice": {}, "test": {}, "export": {"planned": self.plan.export_seconds}}
        after = self.after_training()
        parts = {"training": {"planned": self.budget_seconds - sum(after.values())},
                 **{part: {"planned": seconds} for part, seconds in after.items()}}
        parts["choice"]["candidates"] = self.choice_candidates()
        return parts

    def estimated_updates(self):
        """Updates the time left allows: the rest of the interval in progress,
        then whole intervals each ended by a validation, then a last, shorter
        one if it is worth its validation (`worth_starting`)."""
        seconds = self.pace()
        validation = self.record["validation_seconds"] or 0.0
        left = max(0.0, self.left_for_training())  # the interval in progress's validation already out
        interval = self.plan.interval
        in_progress = -self.record["made_updates"] % interval  # 0 at an interval's end
        if left < in_progress * seconds:
            return int(left / seconds)
        left -= in_progress * seconds
        whole = int(left / (interval * seconds + validation))
        last = int((left - whole * (interval * seconds + validation) - validation) / seconds)
        return in_progress + whole * interval + (last if self.worth_starting(last) else 0)

    def on_test_begin(self, logs=None):  # fit's validation loss pass, which ends each interval
        self.loss_start = self.clock()

    def on_test_end(self, logs=None):
        self.loss_seconds = self.clock() - self.loss_start

    def end_validation(self):
        """Records the validation, checkpoint and backup that ended the last
        interval (from its last batch to now), once. Returns whether there was one."""
        if self.batch_end is None:
            return False
        # Less its timing of the beam search, if it made one (its breakdown's, `on_epoch_end`): the
        # validations that time it are a few (`bleu_validation.BEAM_RETIME_GROWTH`), and their
        # beam decodes are not priced ahead.
        beam = self.breakdowns[-1].get("beam", 0.0) if self.breakdowns else 0.0
        self.validations.append(self.clock() - self.batch_end - beam)
        self.batch_end = None
        return True

    def on_epoch_begin(self, epoch, logs=None):
        if self.end_validation():
            # The longest since the first (an untrained model's outputs all run to the length limit): a
            # half-trained model's can in one validation and not the next (62 s against 10-20 s on
            # LibreOffice; a last one of about 60 s against a median of 19 s on its short pairs put a
            # 17-minute command 44 s over), and a budget's end must not be overrun.
            self.record["validation_seconds"] = float(max(self.validations[1:] or self.validations))
            if "revision" not in self.record:  # the run's first interval and its validation are measured
                self.revise()
                print(self.describe_revision(), flush=True)

    def on_train_batch_end(self, batch, logs=None):
        now = self.clock()
        if self.batch_end is not None:  # an interval's first batch may trace: not timed
            # From the last batch's end: the update with the input pipeline and the callbacks around it.
            self.training_seconds += now - self.batch_end
            self.recent.append(now - self.batch_end)
            self.timed_batches += 1
            self.record["seconds_per_update"] = self.batches_per_update * self.training_seconds / self.timed_batches
        self.batch_end = now
        self.batches += 1
        if self.batches % self.batches_per_update:
            return
        self.record["made_updates"] += 1
        # 0 once the time left is spent; never past the run's last update (`max_updates`), so that a
        # machine much faster than probed still ends its learning rate at zero there.
        more = min(self.estimated_updates(), self.plan.max_updates - self.record["made_updates"])
        self.record["expected_updates"] = self.record["made_updates"] + more
        if self.total_updates is not None:
            self.total_updates.assign(float(self.record["expected_updates"]))
        if not more:
            self.stop()
        if now - self.saved >= self.save_every:
            self._save()

    def revise(self):
        """The plan revised after the first interval, once the run's mean
        seconds per update are known: when they differ from the plan's by
        more than REVISION_TOLERANCE, the updates the budget allows (the
        latest estimate, where the schedule already ends), the epochs they
        make, and a planned warm-up (the plan's `reference_warmup`'s climb,
        `warmup_for`, `climb_scale`), which the schedule's variables take.
        Called when the first interval's validation has ended, so the
        estimate prices validations at its measured seconds. The checkpoint
        interval stays: Keras fixes an epoch's length for the whole `fit`.
        So does the dropout the epochs chose: it is in the traced update.
        Records it as "revision" and returns it."""
        made, measured = self.record["made_updates"], self.record["seconds_per_update"]
        revision = {"after_updates": made, "seconds_per_update": measured,
                    "revised": abs(measured / self.plan.seconds_per_update - 1.0) > REVISION_TOLERANCE}
        if revision["revised"]:
            updates = made + min(self.estimated_updates(), self.plan.max_updates - made)
            self.record["expected_updates"] = updates
            if self.total_updates is not None:
                self.total_updates.assign(float(updates))
            revision["updates"] = updates
            if self.plan.epochs:
                revision["epochs"] = self.plan.epochs * updates / self.plan.updates
            if self.plan.reference_warmup:
                revision["warmup"] = warmup_for(updates, self.plan.reference_warmup)
                revision["learning_rate_scale"] = climb_scale(revision["warmup"], self.plan.reference_warmup)
            self.apply_warmup(revision)
        self.record["revision"] = revision
        return revision

    def apply_warmup(self, revision):
        """Sets the schedule's warm-up and scale to the `revision`'s, if it has them."""
        if "warmup" in revision and self.warmup_steps is not None:
            self.warmup_steps.assign(float(revision["warmup"]))
            self.rate_scale.assign(float(revision["learning_rate_scale"]))

    def describe_revision(self):
        """One line on the revision after the first interval."""
        revision = self.record["revision"]
        said = (f"after {revision['after_updates']} updates, {revision['seconds_per_update']:.2f} s each "
                f"(planned {self.plan.seconds_per_update:.2f})")
        if not revision["revised"]:
            return f"Plan kept {said}: within {REVISION_TOLERANCE:.0%}."
        parts = [f"{revision['updates']:,} updates"]
        if "epochs" in revision:
            parts.append(f"{revision['epochs']:.1f} epochs")
        if "warmup" in revision:
            parts.append(f"warm-up {revision['warmup']} at learning-rate scale {revision['learning_rate_scale']:.4f}")
        return (f"Plan revised {said}: {', '.join(parts)} (planned {self.plan.updates:,}); the checkpoint "
                "interval and dropout stay as planned.")

    def on_epoch_end(self, epoch, logs=None):
        # After the BLEU decode (`BleuValidation` comes first among the callbacks).
        self.validated_updates = self.record["made_updates"]
        breakdown = {"loss": self.loss_seconds, "decode": None}
        if self.validation is not None:
            breakdown["decode"] = self.validation.decode_seconds
            if self.validated_updates > self.plan.interval and self.validation.expected_decode_seconds is not None:
                self.decodes.append(self.validation.expected_decode_seconds)
            if self.validation.beam_seconds:  # this validation measured the beam search
                breakdown["beam"] = self.validation.beam_seconds
                self.record.update({key: getattr(self.validation, key) for key in BEAM_TIMING})
        self.breakdowns.append(breakdown)
        self.loss_seconds = None
        # Too little time for another interval to be worth its validation and checkpoint: stop here.
        if self.too_little_left():
            self.stop()
        self._save()

    def on_train_end(self, logs=None):
        self.end_validation()
        self.record["validations"] = [
            {"seconds": round(seconds, 1),
             **{part: None if spent is None else round(spent, 1) for part, spent in breakdown.items()}}
            for seconds, breakdown in zip(self.validations, self.breakdowns)]
        parts = self.record.setdefault("parts", {})
        parts["training"] = {**parts.get("training", {}), "spent": self.spent()}
        self._save()

    def summary(self):
        """One line: planned against made updates, and the time spent."""
        return (f"Time budget: {self.budget_seconds / 60.0:g} minutes; planned {self.plan.updates} updates at "
                f"{self.plan.seconds_per_update:.2f} s each, made {self.record['made_updates']} "
                f"({self.record['seconds_per_update']:.2f} s each); {self.spent() / 60.0:.1f} minutes spent")
