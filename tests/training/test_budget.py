"""The time budget: parsing, planning, and the callback that spends it.

No test here depends on this machine's speed: the callback runs on a fake
clock that each simulated update and validation advances.
"""

import dataclasses
import types

import keras
import numpy as np
import pytest

from keras_transformer.config import RunConfig, parse_minutes
from keras_transformer.run_dir import RunDir
from keras_transformer.training import budget
from keras_transformer.training.optimization import BudgetCooldown, BudgetVariables, TransformerSchedule


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


def test_a_plan_spends_the_budget_in_its_target_intervals():
    plan = budget.plan(25 * 60.0, 30.0, 1.5)
    assert plan.updates == int((1500 - 30) * (1 - budget.FIRST_OVERHEAD_SHARE) / 1.5)
    assert plan.interval == round(plan.updates / budget.TARGET_INTERVALS)
    assert plan.warmup == round(budget.WARMUP_SHARE * plan.updates)  # until the cool-down: under 4000
    assert budget.plan(25 * 60.0, 30.0, 1.5, max_warmup=400).warmup == 400
    assert plan.max_updates % plan.interval == 0 and plan.max_updates >= 3 * plan.updates
    long = budget.plan(10 * 3600.0, 0.0, 0.5)
    assert long.warmup == 4000  # the paper's, at most
    assert budget.with_interval(plan, 25).max_updates % 25 == 0
    exported = budget.plan(25 * 60.0, 30.0, 1.5, test_sentences=500, export_seconds=60.0)
    assert exported.updates == int((1500 - 30 - 60) * (1 - budget.FIRST_OVERHEAD_SHARE) / 1.5)
    assert (exported.test_sentences, exported.export_seconds) == (500, 60.0)


def test_a_budget_too_small_for_the_first_checkpoint_says_what_would_do():
    with pytest.raises(ValueError, match=r"--time-budget 0.2 minutes leaves time for 3 updates at 3.00 s per "
                                         r"update on this machine; the first checkpoint needs 10\. Give at least "
                                         r"0.6 minutes\."):
        budget.plan(12.0, 0.0, 3.0)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def fake_model(iterations=0):
    return types.SimpleNamespace(optimizer=types.SimpleNamespace(iterations=np.int64(iterations)),
                                 stop_training=False)


def batches(callback, clock, count, seconds):
    """`count` batches of `seconds` each, as `fit` runs them, on the fake clock."""
    for batch in range(count):
        callback.on_train_batch_begin(batch)
        clock.now += seconds
        callback.on_train_batch_end(batch)


def simulate(callback, clock, seconds_per_update, validation_seconds, interval, max_intervals=1000,
             wait=lambda made: 0.0, after_update=lambda: None, loss_seconds=0.0):
    """Drives `callback` as `fit` would, on the fake clock; returns the updates made.
    `validation_seconds`: one figure, or one per interval, of which the
    validation loss pass (`fit`'s evaluate) takes `loss_seconds`. `wait(made)`:
    seconds spent before the next update's batch begins (waiting for its
    input); `after_update()` is called after each update."""
    callback.on_train_begin()
    made = 0
    for epoch in range(max_intervals):
        if callback.model.stop_training:
            break
        callback.on_epoch_begin(epoch)
        for batch in range(interval):
            clock.now += wait(made)
            callback.on_train_batch_begin(batch)
            clock.now += seconds_per_update
            callback.on_train_batch_end(batch)
            made += 1
            after_update()
            if callback.model.stop_training:
                break
        # validation (the loss pass, then the BLEU decode), checkpoint, backup
        callback.on_test_begin()
        clock.now += loss_seconds
        callback.on_test_end()
        clock.now += (validation_seconds[epoch] if isinstance(validation_seconds, list) else validation_seconds) \
            - loss_seconds
        callback.on_epoch_end(epoch)
    callback.on_train_end()
    return made


def test_the_run_stops_when_the_budget_less_the_model_choice_is_spent(tmp_path):
    """Updates of 2 s (the probe said 1.5), validations of 12 s: the callback
    learns both and stops where the time left covers only the last
    validation and the model choice it prices."""
    clock, run_dir = Clock(), RunDir(tmp_path)
    plan = budget.plan(600.0, 0.0, 1.5)
    total = keras.Variable(float(plan.updates), trainable=False)
    callback = budget.TimeBudget(run_dir, 600.0, plan, total, clock=clock)
    callback.set_model(fake_model())
    made = simulate(callback, clock, 2.0, 12.0, plan.interval)
    record = run_dir.read_budget()
    assert record["made_updates"] == made and record["stopped"] is True
    choice = 12.0 * budget.BEAM_COST * 3  # no BleuValidation here: the whole validation prices a decode
    assert record["parts"]["choice"]["planned"] == pytest.approx(choice)
    # It stopped once the time left, less the choice, could not pay for another interval worth its
    # validation: MIN_INTERVAL updates of 2 s (more than the 12 s validation), and that validation.
    assert 600.0 - record["spent_seconds"] - choice < budget.MIN_INTERVAL * 2.0 + 12.0
    assert 600.0 - record["spent_seconds"] >= 0  # within the budget, the choice priced in
    assert record["expected_updates"] == made  # the last estimate: no time for more
    assert float(total.numpy()) == made  # the learning rate's end is the last update
    assert record["seconds_per_update"] == pytest.approx(2.0)
    assert made < plan.updates  # slower than probed: fewer updates than planned


def budgeted_schedule(run_dir, clock, budget_seconds, probed_seconds, cooldown):
    """(plan, the schedule's length variable, the schedule, the callback) of a budget on the fake clock."""
    plan = budget.plan(budget_seconds, 0.0, probed_seconds)
    total = keras.Variable(float(plan.updates), trainable=False)
    schedule = BudgetCooldown(TransformerSchedule(64, plan.warmup), total, cooldown)
    callback = budget.TimeBudget(run_dir, budget_seconds, plan, total, clock=clock)
    callback.set_model(fake_model())
    return plan, total, schedule, callback


def test_the_learning_rate_reaches_zero_at_the_last_update(tmp_path):
    clock = Clock()
    plan, total, schedule, callback = budgeted_schedule(RunDir(tmp_path), clock, 300.0, 1.0, 0.5)
    made = simulate(callback, clock, 0.8, 1.0, plan.interval)  # faster than probed: more updates
    assert made > plan.updates
    rates = [float(schedule(step)) for step in range(made)]
    assert rates[-1] < 0.02 * max(rates)  # the last update runs at the floor's doorstep
    assert float(schedule(made)) == 0.0


def test_a_resumed_run_continues_the_same_budget(tmp_path):
    clock, run_dir = Clock(), RunDir(tmp_path)
    plan = budget.plan(600.0, 0.0, 1.0)
    first = budget.TimeBudget(run_dir, 600.0, plan, clock=clock)
    first.set_model(fake_model())
    first.on_train_begin()
    batches(first, clock, plan.interval, 1.0)  # one interval, then the process is killed
    clock.now += 4.0
    first.on_epoch_end(0)
    spent = run_dir.read_budget()["spent_seconds"]
    assert spent == pytest.approx(plan.interval * 1.0 + 4.0)

    clock.now += 1e6  # time passes while nothing runs: it is not spent
    second = budget.TimeBudget(run_dir, 600.0, plan, clock=clock)
    second.set_model(fake_model(iterations=plan.interval))  # BackupAndRestore restored the update count
    made = simulate(second, clock, 1.0, 4.0, plan.interval)
    record = run_dir.read_budget()
    assert record["made_updates"] == plan.interval + made
    assert record["spent_seconds"] <= 600.0

    third = budget.TimeBudget(run_dir, 600.0, plan, clock=clock)  # started again after the budget ended
    third.set_model(fake_model(iterations=record["made_updates"]))
    third.on_train_begin()
    assert third.model.stop_training  # nothing left to train


def test_a_run_stopped_before_its_first_validation_still_records_every_parts_plan(tmp_path):
    """Updates eight times slower than probed end the first interval's time
    before its validation: the record still plans every part (the CI run that
    exposed this had no "export" entry), from the plan's guess."""
    clock, run_dir = Clock(), RunDir(tmp_path)
    plan = budget.plan(200.0, 0.0, 1.0, export_seconds=15.0)
    callback = budget.TimeBudget(run_dir, 200.0, plan, clock=clock)
    callback.set_model(fake_model())
    made = simulate(callback, clock, 8.0, 10.0, plan.interval)
    record = run_dir.read_budget()
    assert made < plan.interval and record["stopped"] and record["validation_seconds"] is None
    parts = record["parts"]
    assert tuple(parts) == budget.PARTS and parts["export"] == {"planned": 15.0}
    assert parts["training"]["planned"] == pytest.approx(200.0 * (1 - budget.FIRST_OVERHEAD_SHARE) - 15.0)
    assert parts["training"]["spent"] == pytest.approx(record["spent_seconds"])


def test_an_interval_end_with_little_time_left_stops_there(tmp_path):
    """Not one update into a new interval, whose validation and checkpoint would cost more than its updates."""
    clock, run_dir = Clock(), RunDir(tmp_path)
    plan = budget.Plan(seconds_per_update=1.0, updates=100, interval=20, warmup=10, max_updates=300)
    choice = 3 * budget.BEAM_COST * 30.0  # three candidates' beam decodes, priced by the validation
    callback = budget.TimeBudget(run_dir, 120.0 + choice, plan, clock=clock)
    callback.set_model(fake_model())
    callback.on_train_begin()
    callback.on_epoch_begin(0)
    batches(callback, clock, 20, 1.0)
    clock.now += 30.0  # a long validation, measured when the next interval begins
    callback.on_epoch_end(0)
    assert not callback.model.stop_training
    callback.on_epoch_begin(1)
    assert callback.record["validation_seconds"] == pytest.approx(30.0)
    batches(callback, clock, 19, 1.0)
    assert not callback.model.stop_training
    # At the interval's last update, 70 s are spent: this interval's validation (30 s) and the
    # choice leave 20 s, less than another interval and its validation. The
    # update stops the run, and the interval ends as it would have.
    batches(callback, clock, 1, 1.0)
    assert callback.model.stop_training
    clock.now += 30.0
    callback.on_epoch_end(1)
    assert callback.model.stop_training and callback.record["stopped"]
    assert callback.record["expected_updates"] == callback.record["made_updates"] == 40


def test_the_last_interval_is_as_long_as_the_time_left_allows(tmp_path):
    """Intervals of 40 updates of 1 s and validations of 5 s; after three, the
    budget less the choice (three beam decodes priced by the validation) leaves 15 updates and their
    validation. The run makes them in a shorter last interval and ends the
    learning rate there, spending the whole budget."""
    clock, run_dir = Clock(), RunDir(tmp_path)
    plan = budget.Plan(seconds_per_update=1.0, updates=150, interval=40, warmup=10, max_updates=400)
    total = keras.Variable(float(plan.updates), trainable=False)
    seconds = 155.0 + 3 * budget.BEAM_COST * 5.0
    callback = budget.TimeBudget(run_dir, seconds, plan, total, clock=clock)
    callback.set_model(fake_model())
    made = simulate(callback, clock, 1.0, 5.0, plan.interval)
    record = run_dir.read_budget()
    assert made == record["made_updates"] == record["expected_updates"] == 3 * 40 + 15
    assert float(total.numpy()) == made
    assert record["spent_seconds"] + record["parts"]["choice"]["planned"] == pytest.approx(seconds)


def test_a_last_interval_not_worth_its_validation_is_not_started(tmp_path):
    """Validations of 30 s against updates of 1 s: 25 updates would be left
    after the third interval, fewer than the 30 that the validation costs."""
    clock, run_dir = Clock(), RunDir(tmp_path)
    plan = budget.Plan(seconds_per_update=1.0, updates=150, interval=40, warmup=10, max_updates=400)
    total = keras.Variable(float(plan.updates), trainable=False)
    # Three intervals (3 x 70 s), the next validation (30 s), the choice (3 x 2 x 30 s) and 25 s.
    callback = budget.TimeBudget(run_dir, 3 * 70.0 + 30.0 + 180.0 + 25.0, plan, total, clock=clock)
    callback.set_model(fake_model())
    made = simulate(callback, clock, 1.0, 30.0, plan.interval)
    assert made == run_dir.read_budget()["expected_updates"] == 3 * 40
    assert float(total.numpy()) == made


def test_gradient_accumulation_counts_updates_not_batches(tmp_path):
    clock, run_dir = Clock(), RunDir(tmp_path)
    plan = budget.plan(100000.0, 0.0, 2.0)
    callback = budget.TimeBudget(run_dir, 100000.0, plan, batches_per_update=4, clock=clock)
    callback.set_model(fake_model())
    callback.on_train_begin()
    callback.on_epoch_begin(0)
    batches(callback, clock, 9, 0.5)
    assert callback.record["made_updates"] == 2
    assert callback.record["seconds_per_update"] == pytest.approx(2.0)


def test_a_machine_much_faster_than_probed_still_ends_its_learning_rate_at_zero(tmp_path):
    """Updates ten times faster than planned would outrun the plan's bound
    (`max_updates`, where `fit` ends): the schedule's end is that bound, so
    the last update runs at the floor's doorstep and the rate after it is 0."""
    clock, run_dir = Clock(), RunDir(tmp_path)
    plan, total, schedule, callback = budgeted_schedule(run_dir, clock, 600.0, 2.0, 0.2)
    made = simulate(callback, clock, 0.2, 1.0, plan.interval, max_intervals=plan.max_updates // plan.interval)
    assert made == plan.max_updates  # `fit` ran out of intervals before the budget ran out of time
    assert run_dir.read_budget()["spent_seconds"] < 0.5 * 600.0
    assert float(total.numpy()) == made
    assert float(schedule(made)) == 0.0 and float(schedule(made - 1)) > 0.0


class FakeValidation:
    """What `TimeBudget` reads of a `BleuValidation`: its sentences, its last
    decode's seconds and their expected figure, and its timing of the beam
    search (`budget.BEAM_TIMING` and what the last validation spent on it;
    not measured here), and whether its last validation scored the best so
    far (not here, unless a test says so)."""

    def __init__(self, sentences, decode_seconds):
        self.sentences, self.expected_decode_seconds = ["a sentence"] * sentences, decode_seconds
        self.decode_seconds = decode_seconds
        self.beam_cost, self.beam_updates, self.trace_seconds, self.beam_seconds = None, None, None, 0.0
        self.latest_is_best = False


def test_each_validation_is_recorded_with_its_loss_pass_and_its_bleu_decode(tmp_path):
    """Validations of 9 s: a loss pass of 2 s, BLEU decodes of 4 s, then 5 s
    (a slower one), and the checkpoint and backup in the rest. The record
    says each part of each validation, the last included."""
    clock, run_dir = Clock(), RunDir(tmp_path)
    plan = budget.plan(400.0, 0.0, 1.0)
    validation = FakeValidation(200, 4.0)
    callback = budget.TimeBudget(run_dir, 400.0, plan, clock=clock, validation=validation)
    callback.set_model(fake_model())

    def slower_decodes():  # from the second interval on, the BLEU decode takes 5 s
        if callback.record["made_updates"] == plan.interval + 1:
            validation.decode_seconds = 5.0
    simulate(callback, clock, 1.0, 9.0, plan.interval, after_update=slower_decodes, loss_seconds=2.0)
    validations = run_dir.read_budget()["validations"]
    assert len(validations) >= 3
    assert validations[0] == {"seconds": 9.0, "loss": 2.0, "decode": 4.0}
    assert validations[1:] == [{"seconds": 9.0, "loss": 2.0, "decode": 5.0}] * (len(validations) - 1)


def test_the_whole_command_fits_the_budget_the_test_and_export_priced_from_the_validation_decode(tmp_path):
    """200 validation sentences decoded greedily in 4 s price a beam sentence
    at 4 / 200 x BEAM_COST: the choice's three candidates' decodes of 200 and
    three further length penalties' (each LONG_ALPHA_COST), a test of 1,000
    at LONG_ALPHA_COST, plus the plan's export. Training stops where those,
    and the last validation, fill the budget to within an update and a
    validation."""
    clock, run_dir = Clock(), RunDir(tmp_path)
    plan = budget.plan(1200.0, 0.0, 1.0, test_sentences=1000, export_seconds=30.0, alpha_decodes=3)
    assert (plan.choice_decodes, plan.alpha_decodes) == (3, 3) and budget.plan(1200.0, 0.0, 1.0).alpha_decodes == 0
    callback = budget.TimeBudget(run_dir, 1200.0, plan, clock=clock, validation=FakeValidation(200, 4.0))
    callback.set_model(fake_model())
    simulate(callback, clock, 1.0, 6.0, plan.interval)
    record = run_dir.read_budget()
    per_sentence = 4.0 / 200 * budget.BEAM_COST
    parts = record["parts"]
    longer = budget.LONG_ALPHA_COST
    assert longer > 1.0
    assert parts["choice"]["planned"] == pytest.approx((3 + 3 * longer) * 200 * per_sentence)
    assert parts["test"]["planned"] == pytest.approx(1000 * per_sentence * longer)
    assert parts["export"]["planned"] == 30.0
    after = parts["choice"]["planned"] + parts["test"]["planned"] + 30.0
    assert parts["training"]["planned"] == pytest.approx(1200.0 - after)
    assert parts["training"]["spent"] == pytest.approx(record["spent_seconds"])
    left = 1200.0 - record["spent_seconds"] - after
    assert 0.0 <= left < budget.MIN_INTERVAL * 1.0 + 6.0  # no room for another interval worth its validation

    budget.record_part(run_dir, "choice", 20.0, command_seconds=record["spent_seconds"] + 20.0)
    record = run_dir.read_budget()
    assert record["parts"]["choice"] == {"planned": pytest.approx((3 + 3 * longer) * 200 * per_sentence),
                                         "candidates": 3, "spent": 20.0}
    assert budget.describe_parts({**record, "budget_minutes": 20.0}) == (
        f"Time budget: 20 minutes; the command took {record['command_seconds'] / 60:.1f}: training "
        f"{record['spent_seconds'] / 60:.1f} (planned {parts['training']['planned'] / 60:.1f}), choice 0.3 "
        f"(planned {parts['choice']['planned'] / 60:.1f})")


def test_the_choice_is_priced_without_a_best_checkpoint_while_the_last_validation_scores_the_best(tmp_path):
    """The model choice leaves out a best checkpoint that is the last one:
    while the latest validation scores the best so far, the choice is priced
    at two candidates' decodes (and the further alphas'), else at three, and
    the record says which. Training gets the difference."""
    prices = {}
    for latest_is_best in (False, True):
        clock, run_dir = Clock(), RunDir(tmp_path / str(latest_is_best))
        plan = budget.plan(1200.0, 0.0, 1.0, test_sentences=1000, export_seconds=30.0, alpha_decodes=3)
        validation = FakeValidation(200, 4.0)
        validation.latest_is_best = latest_is_best
        callback = budget.TimeBudget(run_dir, 1200.0, plan, clock=clock, validation=validation)
        callback.set_model(fake_model())
        simulate(callback, clock, 1.0, 6.0, plan.interval)
        prices[latest_is_best] = run_dir.read_budget()["parts"]
    beam = 4.0 * budget.BEAM_COST  # a beam decode of the 200 validation sentences
    longer = budget.LONG_ALPHA_COST
    assert prices[False]["choice"] == {"planned": pytest.approx((3 + 3 * longer) * beam), "candidates": 3}
    assert prices[True]["choice"] == {"planned": pytest.approx((2 + 3 * longer) * beam), "candidates": 2}
    assert prices[True]["test"] == prices[False]["test"]
    assert prices[True]["training"]["planned"] == pytest.approx(prices[False]["training"]["planned"] + beam)


def test_a_further_alpha_is_tried_only_if_its_decode_leaves_the_test_and_export_their_time():
    """`decode_fits`: the choice's decodes are priced as the plan priced them
    (a further alpha's at LONG_ALPHA_COST times a candidate's); one more
    must end before the budget less the test's and export's planned seconds."""
    longer = budget.LONG_ALPHA_COST
    per_unit = 10.0  # a candidate's decode
    record = {"budget_minutes": 10.0, "plan": {"choice_decodes": 3, "alpha_decodes": 3},
              "parts": {"training": {"planned": 500.0, "spent": 480.0},
                        "choice": {"planned": (3 + 3 * longer) * per_unit}, "test": {"planned": 40.0},
                        "export": {"planned": 20.0}}}
    edge = 600.0 - 480.0 - 40.0 - 20.0 - longer * per_unit  # seconds since training at which one more just fits
    assert budget.decode_fits(record, edge - 0.01) and budget.decode_fits(record, edge)
    assert not budget.decode_fits(record, edge + 0.01)
    # Priced for two candidates (the last validation scored the best): the same planned seconds buy a dearer decode.
    two = {**record, "parts": {**record["parts"], "choice": {"planned": (3 + 3 * longer) * per_unit,
                                                             "candidates": 2}}}
    per_two = (3 + 3 * longer) * per_unit / (2 + 3 * longer)
    edge_two = 600.0 - 480.0 - 40.0 - 20.0 - longer * per_two
    assert budget.decode_fits(two, edge_two) and not budget.decode_fits(two, edge_two + 0.01)
    # Training stopped before a validation priced the choice: nothing to go by, so the choice is made whole.
    assert budget.decode_fits({**record, "parts": {**record["parts"], "choice": {}}}, 1e6)
    # Once a decode is measured (0.01 s a sentence over 200), the next alpha's and the test's (2,000
    # sentences) are priced from it, not from the plan: ALPHA_STEP_COST times 2 s and 20 s.
    record["plan"]["test_sentences"] = 2000
    step = budget.ALPHA_STEP_COST
    edge = 600.0 - 480.0 - 20.0 - step * 0.01 * 200 - step * 0.01 * 2000
    assert budget.decode_fits(record, edge - 0.01, 0.01, 200) and budget.decode_fits(record, edge, 0.01, 200)
    assert not budget.decode_fits(record, edge + 0.01, 0.01, 200)
    assert edge > 600.0 - 480.0 - 40.0 - 20.0 - longer * per_unit  # here the measure allows more than the plan


def test_the_probe_times_fit_from_one_updates_end_to_the_next_after_the_untimed_ones():
    """The first updates trace and fill buffers (slow here); the figure is the
    timed updates' mean, measured through `fit` as the run measures itself."""
    import tensorflow as tf

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    batches = tf.data.Dataset.from_tensors((np.ones((4, 3), "float32"), np.ones((4, 1), "float32"))).repeat()
    steps = [30.0, 15.0, 5.0, 2.0] + [0.5] * 15 + [1.5]  # four untimed updates, then sixteen, one slow
    ends = iter(np.cumsum(steps))
    seconds = budget.probe_seconds_per_update(model, batches, updates=16, untimed=4, clock=lambda: next(ends))
    assert seconds == pytest.approx((15 * 0.5 + 1.5) / 16)
    assert int(model.optimizer.iterations.numpy()) == 20  # no update more or fewer than asked
    assert next(ends, None) is None  # each update's end read the clock once
    with pytest.raises(ValueError, match="untimed=0"):  # the first update traces: never timed
        budget.probe_seconds_per_update(model, batches, untimed=0)


def test_a_budget_counts_from_the_process_start():
    """A process that slept a second before asking has spent that second."""
    import subprocess
    import sys

    code = ("import time; time.sleep(1.0); from keras_transformer.training.budget import process_start; "
            "print(time.monotonic() - process_start())")
    age = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert 1.0 <= age < 60.0


def test_a_slow_last_validation_does_not_overrun_the_budget(tmp_path):
    """A half-trained model's greedy outputs run to the length limit in some
    validations (30 s) and not in others (10 s); the first, untrained one
    takes 40 s. The next validation is priced at the longest since the
    first, so whichever comes last, the command ends within its budget, and
    less than an interval and a slow validation is left unused."""
    clock, run_dir = Clock(), RunDir(tmp_path)
    plan = budget.Plan(seconds_per_update=1.0, updates=400, interval=60, warmup=10, max_updates=1200)
    total = keras.Variable(float(plan.updates), trainable=False)
    callback = budget.TimeBudget(run_dir, 600.0, plan, total, clock=clock)
    callback.set_model(fake_model())
    made = simulate(callback, clock, 1.0, [40.0, 10.0, 30.0] + [10.0, 30.0] * 10, plan.interval)
    record = run_dir.read_budget()
    assert record["validation_seconds"] == 30.0
    assert [v["seconds"] for v in record["validations"]] == (
        [40.0, 10.0, 30.0] + [10.0, 30.0] * 10)[:len(record["validations"])]
    choice = record["parts"]["choice"]["planned"]  # 3 x 2 x the last validation (no BleuValidation here)
    assert float(total.numpy()) == made
    assert 0.0 <= 600.0 - record["spent_seconds"] - choice < plan.interval * 1.0 + 30.0


def test_a_machine_that_slows_down_mid_run_does_not_overrun_the_budget(tmp_path):
    """Updates of 1 s; from update 300 on, the input pipeline keeps each
    waiting 0.5 s more between updates (the machine is shared with other
    work). An update's time runs from the end of the one before, waits
    included, and the time left is priced at the latest updates' pace: 50
    updates before the stop, the learning rate's end is already placed at
    the last update (priced at the run's mean, it would sit past it), and
    training ends within its share."""
    clock, run_dir = Clock(), RunDir(tmp_path)
    plan = budget.Plan(seconds_per_update=1.0, updates=500, interval=100, warmup=10, max_updates=1500)
    total = keras.Variable(float(plan.updates), trainable=False)
    callback = budget.TimeBudget(run_dir, 600.0, plan, total, clock=clock)
    callback.set_model(fake_model())
    ends = []  # the learning rate's end after each update
    made = simulate(callback, clock, 1.0, 5.0, plan.interval, wait=lambda made: 0.0 if made < 300 else 0.5,
                    after_update=lambda: ends.append(float(total.numpy())))
    record = run_dir.read_budget()
    training = record["parts"]["training"]
    assert training["spent"] <= training["planned"]  # within its share of the budget
    assert training["planned"] - training["spent"] < budget.MIN_INTERVAL * 1.5 + 5.0  # and not far inside it
    assert abs(ends[made - 50] - made) <= 2  # the cool-down's end, predicted 50 updates ahead
    assert callback.pace() == pytest.approx(1.5) and record["seconds_per_update"] < 1.25
    assert float(total.numpy()) == made


def revisable_run(run_dir, clock, probed_seconds, epochs=10.0):
    """(plan, variables, callback): a 10-minute budget planned at `probed_seconds` per update, its
    warm-up following a 400-update climb, with the schedule's variables as the trainer makes them."""
    plan = dataclasses.replace(budget.plan(600.0, 0.0, probed_seconds, max_warmup=400), epochs=epochs)
    training = types.SimpleNamespace(warmup_steps=plan.warmup,
                                     learning_rate_scale=budget.climb_scale(plan.warmup, 400))
    variables = BudgetVariables.create(plan.updates, training)
    callback = budget.TimeBudget(run_dir, 600.0, plan, variables.total_updates, clock=clock,
                                 warmup_steps=variables.warmup_steps, rate_scale=variables.scale)
    callback.set_model(fake_model())
    return plan, variables, callback


def test_a_run_slower_than_probed_revises_its_plan_and_warm_up_after_the_first_interval(tmp_path, capsys):
    clock, run_dir = Clock(), RunDir(tmp_path)
    plan, variables, callback = revisable_run(run_dir, clock, 1.0)
    assert plan.reference_warmup == 400 and plan.warmup == round(budget.WARMUP_SHARE * plan.updates) < 400
    made = simulate(callback, clock, 1.3, 5.0, plan.interval)  # 30% slower than probed
    revision = run_dir.read_budget()["revision"]
    assert revision["revised"] is True and revision["after_updates"] == plan.interval
    assert revision["seconds_per_update"] == pytest.approx(1.3)
    assert abs(made - revision["updates"]) <= budget.MIN_INTERVAL < plan.updates - made  # the estimate held
    assert revision["epochs"] == pytest.approx(10.0 * revision["updates"] / plan.updates)
    assert revision["warmup"] == round(budget.WARMUP_SHARE * revision["updates"]) < plan.warmup
    assert revision["learning_rate_scale"] == pytest.approx((revision["warmup"] / 400) ** 1.5)
    assert float(variables.warmup_steps.numpy()) == revision["warmup"]
    assert float(variables.scale.numpy()) == pytest.approx(revision["learning_rate_scale"])
    # The climb is the same line; it stops at the revised warm-up, where the cool-down begins.
    schedule = TransformerSchedule(64, variables.warmup_steps, variables.scale)
    planned = TransformerSchedule(64, plan.warmup, budget.climb_scale(plan.warmup, 400))
    rates = [float(schedule(step)) for step in range(made)]
    assert rates[:revision["warmup"]] == pytest.approx([float(planned(s)) for s in range(revision["warmup"])])
    assert int(np.argmax(rates)) == revision["warmup"]
    assert "Plan revised after" in capsys.readouterr().out

    # Started again after a kill, with fresh variables at the plan's values: the revision is restored.
    plan, fresh, resumed = revisable_run(run_dir, clock, 1.0)
    resumed.on_train_begin()
    assert float(fresh.warmup_steps.numpy()) == revision["warmup"]
    assert float(fresh.scale.numpy()) == pytest.approx(revision["learning_rate_scale"])


def test_the_work_after_training_is_priced_from_the_decodes_of_a_model_trained_beyond_one_interval(tmp_path):
    """The first interval's model decodes nothing like a trained one (its
    40 s decode would price the choice and the test at ten times what the
    later 4 s ones do): until a later validation, the parts are the plan's
    guess, the budget less FIRST_OVERHEAD_SHARE for training."""
    clock, run_dir = Clock(), RunDir(tmp_path)
    plan = budget.plan(1200.0, 0.0, 1.0, test_sentences=1000, export_seconds=30.0, alpha_decodes=3)
    validation = FakeValidation(200, 40.0)
    callback = budget.TimeBudget(run_dir, 1200.0, plan, clock=clock, validation=validation)
    callback.set_model(fake_model())
    parts_at = {}

    def trained():
        made = callback.record["made_updates"]
        parts_at.setdefault(made, callback.planned_parts())
        if made > plan.interval:
            validation.expected_decode_seconds = validation.decode_seconds = 4.0
    simulate(callback, clock, 1.0, 6.0, plan.interval, after_update=trained)
    guess = {"training": {"planned": 1200.0 * (1 - budget.FIRST_OVERHEAD_SHARE) - 30.0}, "choice": {}, "test": {},
             "export": {"planned": 30.0}}
    assert parts_at[plan.interval + 1] == guess  # after the first validation, whose decode took 40 s
    assert parts_at[2 * plan.interval + 1]["choice"]["planned"] == pytest.approx(
        (3 + 3 * budget.LONG_ALPHA_COST) * 4.0 * budget.BEAM_COST)


def test_the_work_after_training_is_priced_from_the_median_of_the_decodes_after_the_first_interval(tmp_path):
    """One validation decode can stray (on LibreOffice in float32, 1.9 s among
    ones of 1.2-1.4 s, just before the stop): the choice and the test are
    priced from the median of the decodes after the first interval, so that
    neither a slow stray (8 s among 4-s ones) nor a fast one (1 s) moves
    the price, and so the stop."""
    clock, run_dir = Clock(), RunDir(tmp_path)
    plan = budget.plan(1200.0, 0.0, 1.0, test_sentences=1000, export_seconds=30.0, alpha_decodes=3)
    validation = FakeValidation(200, 40.0)
    callback = budget.TimeBudget(run_dir, 1200.0, plan, clock=clock, validation=validation)
    callback.set_model(fake_model())
    decodes = [40.0, 4.0, 4.0, 8.0, 1.0] + [4.0] * 100  # each interval's validation decode, the first raw
    prices = {}

    def validation_decodes():
        made = callback.record["made_updates"]
        if made % plan.interval == 0:  # the interval's last update: its validation decodes next
            validation.expected_decode_seconds = validation.decode_seconds = decodes[made // plan.interval - 1]
        elif made % plan.interval == 1 and made > 2 * plan.interval:  # after a validation of a trained model
            prices[made // plan.interval] = callback.planned_parts()["choice"]["planned"]
    simulate(callback, clock, 1.0, 6.0, plan.interval, after_update=validation_decodes)
    at_four = (3 + 3 * budget.LONG_ALPHA_COST) * 4.0 * budget.BEAM_COST
    assert {4, 5} <= set(prices)  # priced after the slow stray (the fourth validation) and after the fast one
    assert prices == {interval: pytest.approx(at_four) for interval in prices}
    assert run_dir.read_budget()["parts"]["choice"]["planned"] == pytest.approx(at_four)


def test_a_run_within_a_tenth_of_its_probe_keeps_its_plan(tmp_path):
    clock, run_dir = Clock(), RunDir(tmp_path)
    plan, variables, callback = revisable_run(run_dir, clock, 1.0)
    simulate(callback, clock, 1.0 + 0.9 * budget.REVISION_TOLERANCE, 5.0, plan.interval)
    revision = run_dir.read_budget()["revision"]
    assert revision == {"after_updates": plan.interval, "seconds_per_update": pytest.approx(1.09),
                        "revised": False}
    assert float(variables.warmup_steps.numpy()) == plan.warmup
    assert callback.describe_revision().startswith(f"Plan kept after {plan.interval} updates, 1.09 s each")


def test_the_beam_search_measured_by_the_validation_prices_the_work_after_training_and_is_kept(tmp_path):
    """From the validation that measured the beam search at 1.6 greedy
    decodes after a trace of 10 s (without them: BEAM_COST and the plan's
    export, as the test above), the choice and the test are priced at 1.6 and
    the export at EXPORT_TRACE_COST times 10 s. The 7 s that validation spent
    timing it are left out of its seconds, and a resumed run keeps the
    measurement rather than make it again. A run without an export prices none."""
    clock, run_dir = Clock(), RunDir(tmp_path)
    plan = budget.plan(1200.0, 0.0, 1.0, test_sentences=1000, export_seconds=30.0, alpha_decodes=3)
    validation = FakeValidation(200, 4.0)
    callback = budget.TimeBudget(run_dir, 1200.0, plan, clock=clock, validation=validation)
    callback.set_model(fake_model())

    def measured_in_the_second_validation():  # as `BleuValidation` sets them before `TimeBudget` reads them
        made = callback.record["made_updates"]
        if made == 2 * plan.interval:
            validation.beam_cost, validation.beam_updates, validation.trace_seconds = 1.6, made, 10.0
            validation.beam_seconds = 7.0
        elif made > 2 * plan.interval:
            validation.beam_seconds = 0.0
    simulate(callback, clock, 1.0, [6.0, 13.0] + [6.0] * 1000, plan.interval,
             after_update=measured_in_the_second_validation)
    record = run_dir.read_budget()
    units = 3 + 3 * budget.LONG_ALPHA_COST
    assert record["parts"]["choice"]["planned"] == pytest.approx(units * 4.0 * 1.6)
    assert record["parts"]["test"]["planned"] == pytest.approx(1000 / 200 * 4.0 * 1.6 * budget.LONG_ALPHA_COST)
    assert record["parts"]["export"]["planned"] == pytest.approx(budget.EXPORT_TRACE_COST * 10.0)
    assert (record["beam_cost"], record["beam_updates"], record["trace_seconds"]) == (1.6, 2 * plan.interval, 10.0)
    validations = record["validations"]
    assert validations[1] == {"seconds": 6.0, "loss": 0.0, "decode": 4.0, "beam": 7.0}
    assert {v["seconds"] for v in validations} == {6.0} and "beam" not in validations[2]
    assert record["validation_seconds"] == 6.0

    resumed = FakeValidation(200, 4.0)
    again = budget.TimeBudget(run_dir, 1200.0, plan, clock=clock, validation=resumed)
    again.set_model(fake_model(record["made_updates"]))
    again.on_train_begin()
    assert (resumed.beam_cost, resumed.beam_updates, resumed.trace_seconds) == (1.6, 2 * plan.interval, 10.0)
    assert again.beam_cost() == 1.6 and again.export_seconds() == pytest.approx(budget.EXPORT_TRACE_COST * 10.0)
    no_export = budget.TimeBudget(run_dir, 1200.0, dataclasses.replace(plan, export_seconds=0.0), clock=clock,
                                  validation=resumed)
    assert no_export.export_seconds() == 0.0
