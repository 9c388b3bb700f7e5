import keras
import pytest

import keras_transformer as kt


def formula(step, d_model=512, warmup=4000):
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


@pytest.mark.parametrize("step", [1, 4000, 100000])
def test_equals_the_paper_formula(step):
    schedule = kt.TransformerSchedule(d_model=512, warmup_steps=4000)
    assert float(schedule(step)) == pytest.approx(formula(step), rel=1e-6)


def test_step_zero_is_finite_and_warmup_peaks_at_warmup_steps():
    schedule = kt.TransformerSchedule(d_model=512, warmup_steps=4000)
    assert float(schedule(0)) == pytest.approx(formula(1), rel=1e-6)
    assert float(schedule(3999)) < float(schedule(4000)) > float(schedule(4001))


def test_config_round_trip_and_adam():
    schedule = kt.TransformerSchedule(d_model=256, warmup_steps=100, scale=2.0)
    clone = kt.TransformerSchedule.from_config(schedule.get_config())
    assert float(clone(50)) == pytest.approx(float(schedule(50)))
    adam = kt.schedule.paper_adam(schedule)
    restored = keras.optimizers.Adam.from_config(adam.get_config())
    assert (restored.beta_1, restored.beta_2, restored.epsilon) == (0.9, 0.98, 1e-9)
    assert float(restored.learning_rate) == pytest.approx(float(schedule(0)))


def test_rejects_nonpositive_warmup():
    with pytest.raises(ValueError, match="warmup_steps=0"):
        kt.TransformerSchedule(d_model=512, warmup_steps=0)


def test_per_update_schedule_counts_updates_not_micro_batches():
    inner = kt.TransformerSchedule(d_model=512, warmup_steps=4000)
    wrapped = kt.schedule.PerUpdateSchedule(inner, accumulation_steps=4)
    for micro_step in (0, 3, 4, 17, 16003):
        assert float(wrapped(micro_step)) == pytest.approx(float(inner(micro_step // 4)), rel=1e-6)
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(wrapped))
    assert float(clone(17)) == pytest.approx(float(wrapped(17)))


def test_linear_cooldown_falls_to_zero_over_the_last_steps():
    inner = kt.TransformerSchedule(d_model=256, warmup_steps=4)
    cooled = kt.schedule.LinearCooldown(inner, total_steps=10, cooldown_steps=4)
    # Untouched before step 6, then 4/4, 3/4, 2/4, 1/4 of the inner rate, then 0.
    for step, factor in [(0, 1.0), (5, 1.0), (6, 1.0), (7, 0.75), (8, 0.5), (9, 0.25), (10, 0.0), (12, 0.0)]:
        assert float(cooled(step)) == pytest.approx(factor * float(inner(step)), rel=1e-6, abs=1e-12), step
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(cooled))
    assert [float(clone(s)) for s in range(12)] == pytest.approx([float(cooled(s)) for s in range(12)])


@pytest.mark.parametrize("cooldown_steps", [0, 11])
def test_linear_cooldown_rejects_a_length_outside_the_run(cooldown_steps):
    with pytest.raises(ValueError, match=f"cooldown_steps={cooldown_steps}, total_steps=10"):
        kt.schedule.LinearCooldown(kt.TransformerSchedule(256, 4), 10, cooldown_steps)


def test_clock_cooldown_follows_the_share_of_training_time_to_zero():
    """Before the cool-down the rate is the schedule's, whatever the step;
    over the last half of training's time it falls linearly to zero."""
    from keras_transformer.training.optimization import ClockCooldown

    base = kt.TransformerSchedule(d_model=64, warmup_steps=10)
    progress = keras.Variable(0.0, trainable=False)
    schedule = ClockCooldown(base, progress, cooldown=0.5)
    for share, factor in ((0.0, 1.0), (0.5, 1.0), (0.75, 0.5), (0.9, 0.2), (1.0, 0.0), (1.2, 0.0)):
        progress.assign(share)
        for step in (3, 40, 4000):  # the same share of the time at any update count
            assert float(schedule(step)) == pytest.approx(factor * float(base(step)), rel=1e-6, abs=1e-12)
    progress.assign(0.75)
    restored = ClockCooldown.from_config(schedule.get_config())
    assert float(restored(40)) == pytest.approx(float(schedule(40)))
    with pytest.raises(ValueError, match=r"cooldown must be in \(0, 1\]; got 0.0"):
        ClockCooldown(base, 0.0, 0.0)
