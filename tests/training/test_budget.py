"""The time budget: its record, its pricing, and the clock that spends it.

No test here depends on this machine's speed: the callback runs on a fake
clock that each simulated update and validation advances, and the
learning-rate schedule it drives is the run's own (`ClockCooldown`).
"""

import dataclasses
import types

import keras
import pytest

from keras_transformer.config import RunConfig, parse_minutes
from keras_transformer.run_dir import RunDir
from keras_transformer.training import budget
from keras_transformer.training.budget_callback import TimeBudget
from keras_transformer.training.optimization import ClockCooldown, TransformerSchedule

# What the work after training takes on the fake machine, as measured on
# LibreOffice at 25 minutes: decodes at alpha 0.8, 1.0 and 1.2 take these
# times 0.6's, and the export 3.6 times the first beam decode's trace.
ALPHA_SLOWDOWN = (1.28, 1.42, 1.69)


@pytest.mark.parametrize("text,minutes", [("25", 25.0), ("25m", 25.0), ("90min", 90.0), ("1.5h", 90.0),
                                          ("45s", 0.75), (" 2.5 ", 2.5)])
def test_a_budget_is_minutes_or_a_duration(text, minutes):
    assert parse_minutes(text) == pytest.approx(minutes)


@pytest.mark.parametrize("text,message", [("soon", "is not a duration"), ("-5", "is not a duration"),
                                          ("0", "must be positive"), ("", "is not a duration"),
                                          ("1.5 days", "is not a duration")])
def test_a_bad_budget_is_named(text, message):
    with pytest.raises(ValueError, match=f"--time-budget {text!r} {message}"):
        parse_minutes(text)
    with pytest.raises(ValueError, match="--time-budget"):
        RunConfig(time_budget=text)


def test_a_budget_needs_a_cool_down_and_a_resume_keeps_its_budget():
    with pytest.raises(ValueError, match="needs a cool-down"):
        RunConfig(time_budget="25", cooldown=0.0)
    with pytest.raises(ValueError, match=r"--time-budget '25' -> '50'"):
        RunConfig(time_budget="50", model_dir="r").check_resumes(RunConfig(time_budget="25", model_dir="r"))


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class Machine:
    """A run of a 10-minute budget on a fake clock: its record (started after
    `setup` seconds, as the recipe starts it), its schedule and its clock
    callback, and `fit`, which drives them as Keras does."""

    def __init__(self, run_dir, minutes=10.0, setup=20.0, batches_per_update=1, process_start=None):
        self.run_dir, self.clock = run_dir, Clock()
        if budget.load(run_dir) is None:
            budget.save(run_dir, budget.Record(minutes, budget.Work(alphas=3, test_sentences=1000), spent=setup))
            process_start = self.clock.now - setup
        self.progress = keras.Variable(0.0, trainable=False, dtype="float32")
        self.schedule = ClockCooldown(TransformerSchedule(64, 40), self.progress, budget.COOLDOWN_SHARE)
        self.callback = TimeBudget(run_dir, self.progress, batches_per_update, clock=self.clock,
                                   process_start=process_start, verbose=False)
        self.callback.set_model(types.SimpleNamespace(stop_training=False))
        self.rates, self.training, self.ends = [], 0.0, []  # each update's rate, and its training time

    def fit(self, seconds, validation=10.0, beam=4.0, trace=2.0, initial_epoch=0, kill_after=None,
            other=lambda where, model: None):
        """Keras' fit loop over budget.INTERVALS epochs of unbounded length.
        `seconds(update)`: that update's seconds. Each validation takes
        `validation` seconds, and the second one also times the beam search
        (as `BleuValidation` does): `beam` seconds a decode of its 200
        sentences after a `trace` of one. `kill_after`: the process dies
        after that many updates; `other(where, model)`: another callback,
        called before and after the clock's batch and epoch ends ("batch
        before", ...)."""
        model, callback = self.callback.model, self.callback
        model.stop_training = False
        callback.on_train_begin()
        for epoch in range(initial_epoch, budget.INTERVALS):
            callback.on_epoch_begin(epoch)
            while not model.stop_training:
                callback.on_train_batch_begin(0)
                self.rates.append(float(self.schedule(len(self.rates) + 1)))
                self.clock.now += seconds(len(self.rates))
                self.training += seconds(len(self.rates))
                self.ends.append(self.training)
                other("batch before", model)
                callback.on_train_batch_end(0, {"loss": 3.0})
                other("batch after", model)
                if kill_after == len(self.rates):
                    return
            self.validate(epoch, validation, beam, trace)
            other("epoch before", model)
            callback.on_epoch_end(epoch, {"val_bleu": 1.0})
            other("epoch after", model)
            if model.stop_training:
                break
        callback.on_train_end()

    def validate(self, epoch, validation, beam, trace):
        self.clock.now += validation
        state = {"scores": {}, "best_epoch": None}
        if epoch == 1:  # BleuValidation's first timing of the beam search
            self.clock.now += trace + beam
            timing = budget.BeamTiming(beam, 200, trace, updates=len(self.rates))
            state = {"scores": {"1": {"beam_seconds": trace + beam}}, "best_epoch": None,
                     "beam": dataclasses.asdict(timing)}
        if epoch <= 1:
            self.run_dir.write_validation_state(state)

    def work_after_training(self, beam=4.0, trace=2.0):
        """The model choice (three candidates, then three more alphas), the
        test at the alpha it chose (1.0) and the export, taking what they
        take on LibreOffice for a beam decode of `beam` seconds; each part
        recorded as the recipe records it. Returns the record."""
        since = 0.0
        test = beam / 200 * 1000 * ALPHA_SLOWDOWN[1]
        for part, seconds in (("choice", beam * (3 + sum(ALPHA_SLOWDOWN))), ("test", test),
                              ("export", 3.6 * trace)):
            since += seconds
            budget.record_part(self.run_dir, part, seconds, since)
        return budget.load(self.run_dir)


def constant(seconds):
    return lambda update: seconds


@pytest.mark.parametrize("seconds", [
    constant(0.25),  # twice as fast as the recipe's probe would have said
    constant(0.5),
    constant(1.0),  # twice as slow
    lambda update: 0.5 if update < 400 else 1.0,  # slows down by half mid-run
], ids=["2x-faster", "as-probed", "2x-slower", "slows-mid-run"])
def test_on_any_machine_the_rate_reaches_zero_as_training_time_ends_and_the_command_fits(tmp_path, seconds):
    machine = Machine(RunDir(tmp_path))
    machine.fit(seconds)
    record = machine.work_after_training()
    rates, peak = machine.rates, max(machine.rates)
    # The rate is zero at the end of training's time: within its last 1% (the last update's share).
    assert min(rates[:-1]) > 0.0 and rates[-1] <= 0.01 * peak
    assert float(machine.schedule(len(rates) + 1)) == 0.0
    assert [later <= earlier for earlier, later in zip(rates[len(rates) // 2:], rates[len(rates) // 2 + 1:])]
    # Half of training's time in, the cool-down had not begun: the rate was the warm-up's schedule's own.
    half = next(i for i, end in enumerate(machine.ends) if end >= machine.training / 2) - 2
    assert rates[half] == pytest.approx(float(TransformerSchedule(64, 40)(half + 1)), rel=1e-5)
    assert record.stopped and record.updates == len(rates) and record.training == pytest.approx(machine.training)
    # The whole command within its budget, and short of it by little.
    assert 0.97 * 600.0 <= record.command_seconds <= 600.0
    assert len(record.validations) == budget.INTERVALS


def test_checkpoints_fall_at_shares_of_training_time_not_of_the_updates(tmp_path):
    """A machine that slows down mid-run: the intervals' ends are evenly
    spaced in training time, so the later ones hold fewer updates."""
    machine = Machine(RunDir(tmp_path))
    ends = []
    machine.callback.on_epoch_end = (lambda epoch, logs=None, end=TimeBudget.on_epoch_end.__get__(machine.callback):
                                     ends.append(machine.training) or end(epoch, logs))
    machine.fit(lambda update: 0.5 if update < 300 else 1.0, validation=30.0)
    assert len(ends) == budget.INTERVALS
    gaps = [later - earlier for earlier, later in zip([0.0] + ends, ends)]
    # The first two end on estimates (validations unmeasured, then the work after training); the rest, once
    # both are measured, each at a sixth of training's time, within an update.
    assert max(gaps[2:]) - min(gaps[2:]) <= 1.0 and gaps[2] == pytest.approx(machine.training / 6, rel=0.05)
    updates = [sum(1 for end in machine.ends if earlier < end <= later) for earlier, later in zip([0.0] + ends, ends)]
    assert updates[2] > updates[3] and abs(updates[3] - updates[4]) <= 1  # slower, so fewer updates a sixth
    assert budget.load(machine.run_dir).validations[1:] == pytest.approx([30.0] * (budget.INTERVALS - 1))


def test_a_slow_validation_does_not_eat_the_cool_down(tmp_path):
    """Validations of a minute each are not training: the cool-down still
    spans the second half of training's seconds, and the command fits."""
    machine = Machine(RunDir(tmp_path), minutes=20.0)
    machine.fit(constant(0.5), validation=60.0)
    record = machine.work_after_training()
    rates, ends = machine.rates, machine.ends
    three_quarters = next(i for i, end in enumerate(ends) if end >= 0.75 * machine.training)
    assert rates[three_quarters] == pytest.approx(0.5 * float(TransformerSchedule(64, 40)(three_quarters + 1)),
                                                  rel=0.02)
    assert 0.97 * 1200.0 <= record.command_seconds <= 1200.0


def test_a_run_killed_mid_cool_down_continues_the_same_curve_when_started_again(tmp_path):
    """Killed in its fifth interval and started again (a new process that
    spends 15 s starting, BackupAndRestore back at interval 4's start): the
    first update after the resume runs at the rate of the curve where the
    clock left it, not the warm-up's, and the run still ends at zero in
    its budget."""
    run_dir = RunDir(tmp_path)
    machine = Machine(run_dir)
    machine.fit(constant(0.5), kill_after=800)
    before = machine.rates[-1]
    record = budget.load(run_dir)
    after = budget.after_training(record, budget.BeamTiming(4.0, 200, 2.0))
    assert 0.5 < budget.progress(record, after) < 1.0  # in the cool-down
    # The recipe's resume: what the dead process spent is the earlier processes'.
    budget.save(run_dir, dataclasses.replace(record, earlier=record.spent))
    resumed = Machine(run_dir, process_start=machine.clock.now)
    resumed.clock.now = machine.clock.now + 15.0
    resumed.rates = list(machine.rates)
    resumed.fit(constant(0.5), initial_epoch=4)
    after = resumed.rates[800]  # what the clock lost with the kill is the last save's (5 s) at most
    assert after == pytest.approx(before, rel=0.1) and after < 0.5 * max(machine.rates)
    assert resumed.rates[-1] <= 0.01 * max(resumed.rates)
    assert 0.97 * 600.0 <= resumed.work_after_training().command_seconds <= 600.0


@pytest.mark.parametrize("where", ["batch before", "batch after", "epoch before", "epoch after"])
def test_another_callbacks_stop_ends_the_run_wherever_it_stands_among_the_callbacks(tmp_path, where):
    """TerminateOnNaN (at a batch's end) or early stopping (at an epoch's)
    asks the whole run to stop at the end of the first interval; the clock,
    which ends intervals through the same flag, does not undo it, whether it
    runs before or after that callback."""
    machine = Machine(RunDir(tmp_path))

    def other(at, model):
        if at != where:
            return
        if at.startswith("epoch") or (at == "batch before" and len(machine.rates) == 100):
            model.stop_training = True
        elif at == "batch after" and model.stop_training:  # the clock has just ended the first interval
            model.stop_training = True

    machine.fit(constant(0.5), other=other)
    record = budget.load(machine.run_dir)
    assert len(record.validations) == 1 and not record.stopped
    assert record.updates == 100 if where == "batch before" else 0.1 < budget.progress(record) < 0.25


def test_gradient_accumulation_counts_updates_not_batches(tmp_path):
    machine = Machine(RunDir(tmp_path), batches_per_update=4)
    machine.fit(constant(0.125))
    record = budget.load(machine.run_dir)
    assert record.updates == len(machine.rates) // 4
    assert record.training == pytest.approx(machine.training)


def test_before_the_beam_search_is_timed_the_work_after_training_is_a_reserve_then_its_price():
    record = budget.Record(25.0, budget.Work(test_sentences=2000))
    reserve = budget.after_training(record, None)
    assert sum(reserve.values()) == pytest.approx(budget.RESERVE_SHARE * 1500.0)
    fast, slow = (budget.after_training(record, budget.BeamTiming(s, 200, 2.0)) for s in (2.0, 4.0))
    assert sum(slow.values()) - slow["export"] == pytest.approx(2 * (sum(fast.values()) - fast["export"]))
    no_export = budget.after_training(dataclasses.replace(record, work=budget.Work(export=False)),
                                      budget.BeamTiming(2.0, 200, 2.0))
    assert no_export["export"] == 0.0
    # While the latest validation scored the best, the choice decodes one candidate less (no separate best).
    best_last = budget.after_training(record, budget.BeamTiming(2.0, 200, 2.0), latest_is_best=True)
    assert fast["choice"] - best_last["choice"] == pytest.approx(2.0) and best_last["test"] == fast["test"]


def test_a_budget_too_small_for_an_update_per_checkpoint_says_what_would_do():
    record = budget.Record(0.2, budget.Work(), spent=5.0)
    with pytest.raises(ValueError, match=r"--time-budget 0.2 minutes leaves training \d+ s, fewer than one update "
                                         r"per checkpoint \(6 at 3.00 s each on this machine\)\. Give at least "
                                         r"[\d.]+ minutes\."):
        budget.check_fits(record, 3.0)
    message = ""
    try:
        budget.check_fits(record, 3.0)
    except ValueError as error:
        message = str(error)
    enough = float(message.split("Give at least ")[1].split(" minutes")[0])
    budget.check_fits(dataclasses.replace(record, budget_minutes=enough), 3.0)  # the advice suffices


def test_a_further_decode_is_made_only_while_it_leaves_the_test_and_export_their_time():
    """`decode_fits` at its boundary: 500 s spent of 600, the export priced at
    8 s, and a decode of 200 sentences then the test's 1,000 at 1/32 s a
    sentence (37.5 s) fit up to 54.5 s after training, not after; priced 1.5
    times longer (the next length penalty), up to 35.75 s."""
    record = budget.Record(10.0, budget.Work(alphas=3, test_sentences=1000), spent=500.0,
                           priced={"choice": 40.0, "test": 30.0, "export": 8.0})
    assert budget.decode_fits(record, 54.5, 1 / 32, 200)
    assert not budget.decode_fits(record, 54.5 + 1e-6, 1 / 32, 200)
    assert budget.decode_fits(record, 35.75, 1 / 32, 200, growth=1.5)
    assert not budget.decode_fits(record, 35.75 + 1e-6, 1 / 32, 200, growth=1.5)


def test_the_record_round_trips_and_a_record_of_another_version_is_refused(tmp_path):
    run_dir = RunDir(tmp_path)
    record = budget.Record(25.0, budget.Work(alphas=3, test_sentences=7), ("vocab_size 8000: ...",), spent=12.5,
                           validations=(3.0, 4.0), priced={"choice": 1.0}, parts={"test": 2.0})
    budget.save(run_dir, record)
    assert budget.load(run_dir) == record
    run_dir.write_budget({"plan": {"updates": 100}})
    with pytest.raises(ValueError, match="fields this version does not know \\(plan\\)"):
        budget.load(run_dir)


def test_the_probe_times_fit_from_one_updates_end_to_the_next_after_the_untimed_ones():
    import tensorflow as tf

    clock = Clock()

    class Slow(keras.callbacks.Callback):  # each batch takes 2 s on the fake clock, the first ones 9 s
        def on_train_batch_begin(self, batch, logs=None):
            clock.now += 9.0 if batch < 2 else 2.0

    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    original = model.fit
    model.fit = lambda *args, callbacks=(), **kwargs: original(*args, callbacks=[Slow(), *callbacks], **kwargs)
    data = tf.data.Dataset.from_tensors((tf.ones((1, 1)), tf.ones((1, 1)))).repeat()
    assert budget.probe_seconds_per_update(model, data, updates=5, untimed=2, clock=clock) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="at least one untimed"):
        budget.probe_seconds_per_update(model, data, untimed=0)


def test_a_budget_counts_from_the_process_start():
    clock = Clock()
    start = budget.process_start(clock)
    assert start <= clock.now
