"""Training to a time budget (`--time-budget MINUTES`): the schedule reads the clock.

The budget covers the whole command, from the process's start
(`process_start`) to the export. Training gets what the rest leaves:

    training's seconds = the budget - what was spent outside updates
                         - the validations to come - the work after training

where the work after training is the model choice's and the test's beam
decodes and the export (`Work`). Nothing here forecasts a number of
updates. What is spent is read off the clock. A validation is priced at the
longest measured after the first. The work after training is priced from
this run's own timing of its beam search (`BeamTiming`, measured by
`bleu_validation.BleuValidation`), and until that timing exists at
RESERVE_SHARE of the budget (`after_training`).

The `budget_callback.TimeBudget` callback adds up the seconds of updates
(validations and checkpoints are not training) and hands their share of
training's seconds (`progress`) to the learning-rate schedule
(`optimization.ClockCooldown`), which falls linearly to zero over the last
COOLDOWN_SHARE of it. So the rate is zero when training's time ends,
however fast the machine is or becomes. Checkpoints, each with a
validation and a backup, fall at every INTERVALS-th of training's time,
the last where training stops.

The run's record is `Record`, in the run folder's budget.json, written only
by `save`: the recipe starts it, the callback adds what training spent, and
`record_part` adds each part after training.

References:
    Li, Yumer and Ramanan, "Budgeted Training: Rethinking Deep Neural Network
    Training Under Resource Constraints", ICLR 2020 (a schedule over the
    budget, linear to zero at its end).
"""

import dataclasses
import math
import os
import time

import keras

# Checkpoints (validation, backup) at every INTERVALS-th of training's time: a
# learning curve of six points, and the last checkpoints in the cool-down to average.
INTERVALS = 6
# The learning rate falls linearly to zero over this last share of training's
# time. Dev BLEU (docs/training.md at 28bd8c9): half the run 38.11 against 35.43 for the
# last 20% (Hägele et al., 2024) on LibreOffice's short pairs at 17 minutes.
COOLDOWN_SHARE = 0.5
# What the work after training is priced at until the run has timed its beam
# search: it took 0.8-2.4 of LibreOffice's 25 minutes (up to 9.6%, float32).
RESERVE_SHARE = 0.12
# A beam decode at a longer length penalty runs longer: on LibreOffice's 200
# validation sentences alpha 0.8, 1.0 and 1.2 took 1.28, 1.42 and 1.69 times
# 0.6's seconds. Further alphas, and a test at one, are priced at this.
LONG_ALPHA_COST = 1.5
# The same, one alpha to the next: 1.28, 1.10 and 1.20 times the seconds. Once
# the choice has timed a decode, the next alpha's is priced at this.
ALPHA_STEP_COST = 1.3
# The export traces three serving signatures around the beam search: 3.6 times
# the validation's first, tracing, beam decode of one sentence (LibreOffice at
# 25 minutes, mixed_bfloat16: 7.4 s against 2.05).
EXPORT_TRACE_COST = 3.6


@dataclasses.dataclass(frozen=True)
class Work:
    """The work after training, in decodes: the model choice's beam decodes of
    the validation sentences (one per candidate, `choice`, and one per
    further length penalty, `alphas`), the test's sentences, and whether
    there is an export."""

    choice: int = 3
    alphas: int = 0
    test_sentences: int = 0
    export: bool = True


@dataclasses.dataclass(frozen=True)
class BeamTiming:
    """A validation's timing of the run's beam search: the seconds of one
    decode of its `sentences` (at the outputs' own length, or the
    references' where they ran longer), the seconds of its first, tracing,
    decode of one sentence, and the updates of the model it timed."""

    seconds: float
    sentences: int
    trace_seconds: float
    updates: int = 0


@dataclasses.dataclass(frozen=True)
class Record:
    """A budgeted run's budget.json.

    budget_minutes; work (`Work`); recipe: its 'recipe:' lines; spent: the
    command's seconds so far, over every process that ran it; earlier: of
    them, those of the processes before the one running; training: of
    them, the seconds of updates; updates: those made; validations: the
    seconds of each (its decode, checkpoint and backup; less the beam timing);
    priced: {part: seconds} the parts after training were last priced at;
    stopped: whether the budget ended training; parts: {part: seconds} each
    part after training took, once done; command_seconds: the whole
    command's, once done."""

    budget_minutes: float
    work: Work = Work()
    recipe: tuple = ()
    spent: float = 0.0
    earlier: float = 0.0
    training: float = 0.0
    updates: int = 0
    validations: tuple = ()
    priced: dict = dataclasses.field(default_factory=dict)
    stopped: bool = False
    parts: dict = dataclasses.field(default_factory=dict)
    command_seconds: float = 0.0

    @property
    def budget_seconds(self):
        return 60.0 * self.budget_minutes


def load(run_dir):
    """The run's `Record`, or None without one."""
    values = run_dir.read_budget()
    if values is None:
        return None
    unknown = sorted(set(values) - {field.name for field in dataclasses.fields(Record)})
    if unknown:
        raise ValueError(f"{run_dir.budget_path!r} has fields this version does not know ({', '.join(unknown)}): "
                         "it was written by another version of keras_transformer. Pass another --model-dir, or "
                         "delete that folder to start over.")
    return Record(**{**values, "work": Work(**values["work"]), "recipe": tuple(values["recipe"]),
                     "validations": tuple(values["validations"])})


def save(run_dir, record):
    """Writes `record` as the run's budget.json, whole."""
    run_dir.write_budget(dataclasses.asdict(record))


def after_training(record, beam, latest_is_best=False):
    """{part: seconds} of the work after training (`record.work`), priced from
    the validation's `beam` timing; with none yet, RESERVE_SHARE of the
    budget, all under "choice". While the latest validation scored the best
    (`latest_is_best`), the choice is priced without a best checkpoint: it
    decodes none that is the last one."""
    work = record.work
    if beam is None:
        return {"choice": RESERVE_SHARE * record.budget_seconds, "test": 0.0, "export": 0.0}
    sentence = beam.seconds / max(beam.sentences, 1)
    longer = LONG_ALPHA_COST if work.alphas else 1.0
    candidates = work.choice - (1 if latest_is_best and work.choice > 1 else 0)
    return {"choice": beam.seconds * (candidates + LONG_ALPHA_COST * work.alphas),
            "test": sentence * longer * work.test_sentences,
            "export": EXPORT_TRACE_COST * beam.trace_seconds if work.export else 0.0}


def validation_price(validations):
    """The seconds a validation to come is priced at: the longest of those
    after the first (an untrained model's outputs run to the length limit),
    the first while it is alone, 0 before any."""
    return max(validations[1:] or validations or (0.0,))


def training_seconds(record, after=None):
    """Seconds of updates the budget gives training in all (those made and
    those to come) as the `record` stands: the budget less what was spent
    outside updates, the validations still to come (one per interval not yet
    ended) and the work after training (`after`, {part: seconds}; by default
    as priced before the beam search is timed: `after_training`)."""
    after = after_training(record, None) if after is None else after
    to_come = max(0, INTERVALS - len(record.validations)) * validation_price(record.validations)
    outside = record.spent - record.training
    return record.budget_seconds - outside - to_come - sum(after.values())


def progress(record, after=None):
    """The share of training's seconds spent (1 once they are all spent)."""
    total = training_seconds(record, after)
    return 1.0 if total <= record.training else record.training / total


def check_fits(record, seconds_per_update):
    """ValueError unless the budget, as `record` stands before training,
    leaves time for an update per checkpoint interval at `seconds_per_update`."""
    total = training_seconds(record)
    if total < INTERVALS * seconds_per_update:
        spent = record.spent - record.training
        needed = (spent + INTERVALS * seconds_per_update) / (60.0 * (1.0 - RESERVE_SHARE))
        raise ValueError(
            f"--time-budget {record.budget_minutes:g} minutes leaves training {max(total, 0.0):.0f} s, fewer than "
            f"one update per checkpoint ({INTERVALS} at {seconds_per_update:.2f} s each on this machine). Give at "
            f"least {math.ceil(needed * 10) / 10:g} minutes.")


def decode_fits(record, since_training, seconds_per_sentence, sentences, growth=1.0):
    """Whether a budgeted run (its `record` as training left it) has time,
    `since_training` seconds after training ended, for one more decode of
    the model choice's `sentences` (another candidate; with `growth`
    ALPHA_STEP_COST, the next length penalty), then for the test and the
    export, each sentence priced at `growth` times `seconds_per_sentence`
    (the choice's last decode's)."""
    decodes = growth * seconds_per_sentence * (sentences + record.work.test_sentences)
    spent = record.spent + since_training
    return spent + decodes + record.priced.get("export", 0.0) <= record.budget_seconds


def record_part(run_dir, part, seconds, since_training):
    """Adds to the run's record the `seconds` a part after training took, and
    the command's seconds so far (`since_training`: since training ended)."""
    record = load(run_dir)
    save(run_dir, dataclasses.replace(record, parts={**record.parts, part: float(seconds)},
                                      command_seconds=record.spent + float(since_training)))


def describe(record):
    """One line: the budget, the command's minutes, each part's (against its price, after training) and the updates."""
    parts = {"training": record.training, **record.parts}
    said = ", ".join(f"{part} {parts[part] / 60.0:.1f}" + (f" (priced {record.priced[part] / 60.0:.1f})"
                                                          if part in record.priced else "")
                     for part in ("training", "choice", "test", "export") if part in parts)
    return (f"Time budget: {record.budget_minutes:g} minutes; the command took {record.command_seconds / 60.0:.1f}: "
            f"{said}; {record.updates:,} updates")


def probe_seconds_per_update(model, batches, updates=16, untimed=4, clock=time.perf_counter):
    """Seconds per update of a compiled `model` trained by `fit` on `batches`
    (the run's own repeating tf.data pipeline), from one update's end to the
    next, as `TimeBudget` counts training: the input pipeline and the fit
    loop count. The first `untimed` updates trace the train step and fill the
    shuffle buffers. The recipe chooses by it; nothing plans by it. The
    model's weights and optimizer state change."""
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
