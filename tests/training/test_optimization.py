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


def test_budget_cooldown_follows_its_variable_to_zero():
    from keras_transformer.training.optimization import BudgetCooldown

    base = kt.TransformerSchedule(d_model=64, warmup_steps=10)
    total = keras.Variable(100.0, trainable=False)
    schedule = BudgetCooldown(base, total, cooldown=0.5)
    assert float(schedule(40)) == pytest.approx(float(base(40)))
    assert float(schedule(75)) == pytest.approx(0.5 * float(base(75)))
    assert float(schedule(100)) == 0.0
    total.assign(200.0)  # training found time for more updates: the cool-down moves
    assert float(schedule(100)) == pytest.approx(float(base(100)))
    assert float(schedule(150)) == pytest.approx(0.5 * float(base(150)))
    restored = BudgetCooldown.from_config(schedule.get_config())
    assert float(restored(150)) == pytest.approx(float(schedule(150)))
    with pytest.raises(ValueError, match=r"cooldown must be in \(0, 1\]; got 0.0"):
        BudgetCooldown(base, 100, 0.0)


def test_a_schedule_with_variable_warmup_and_scale_equals_the_fixed_one_at_their_values():
    warmup, scale = keras.Variable(100.0, trainable=False), keras.Variable(1.0, trainable=False)
    schedule = kt.TransformerSchedule(64, warmup, scale)
    steps = [0, 1, 50, 99, 100, 101, 400]
    assert [float(schedule(s)) for s in steps] == pytest.approx([float(kt.TransformerSchedule(64, 100)(s))
                                                                 for s in steps])
    warmup.assign(64.0)  # revised: the climb stops earlier, at the same line's rate (scale (64/100)^1.5)
    scale.assign(0.512)
    assert [float(schedule(s)) for s in steps] == pytest.approx(
        [float(kt.TransformerSchedule(64, 64, 0.512)(s)) for s in steps])
    assert float(schedule(50)) == pytest.approx(float(kt.TransformerSchedule(64, 100)(50)))  # still climbing
    assert schedule.get_config() == {"d_model": 64, "warmup_steps": 64, "scale": pytest.approx(0.512)}
    with pytest.raises(ValueError, match="warmup_steps=0"):
        kt.TransformerSchedule(64, keras.Variable(0.0, trainable=False))
