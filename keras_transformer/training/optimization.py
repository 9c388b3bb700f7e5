"""Optimisation: the paper's learning-rate schedule (section 5.3, equation 3), the
linear cool-down and gradient-accumulation wrappers around it, and the Adam
set-up of section 5.3 (`make_optimizer`)."""

import keras
from keras import ops

from keras_transformer.config import PAPER_WARMUP_STEPS


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5).

    Linear warm-up for `warmup_steps`, then decay with the inverse square root
    of the step. Keras counts optimizer steps from 0; step 0 is treated as
    step 1, so the first update uses the formula's step-1 value and nothing is
    ever divided by zero.

    Args:
        d_model: int. Model width (512 for base, 1024 for big).
        warmup_steps: int. 4000 in the paper (`config.PAPER_WARMUP_STEPS`, the default).
        scale: float. Multiplies the whole schedule (1.0 in the paper).

    Example:
    >>> schedule = TransformerSchedule(d_model=512, warmup_steps=4000)
    >>> optimizer = keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    """

    def __init__(self, d_model, warmup_steps=PAPER_WARMUP_STEPS, scale=1.0):
        if int(d_model) < 1 or int(warmup_steps) < 1:
            raise ValueError(
                f"d_model and warmup_steps must be positive; got d_model={d_model}, "
                f"warmup_steps={warmup_steps}."
            )
        self.d_model = int(d_model)
        self.warmup_steps = int(warmup_steps)
        self.scale = float(scale)

    def __call__(self, step):
        step = ops.maximum(ops.cast(step, "float32"), 1.0)
        warmup = ops.cast(ops.convert_to_tensor(self.warmup_steps), "float32")
        decay = ops.minimum(ops.rsqrt(step), step * ops.power(warmup, -1.5))
        return ops.cast(ops.convert_to_tensor(self.scale), "float32") * self.d_model**-0.5 * decay

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "scale": self.scale}


def paper_adam(schedule, **kwargs):
    """Adam with the paper's beta_1=0.9, beta_2=0.98, epsilon=1e-9; `kwargs`
    go to `keras.optimizers.Adam` (e.g. gradient accumulation)."""
    return keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9, **kwargs)


class _WrapsSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Base of schedules that transform another one, kept under "schedule" in their config."""

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["schedule"] = keras.saving.deserialize_keras_object(config["schedule"])
        return cls(**config)


@keras.saving.register_keras_serializable(package="keras_transformer")
class PerUpdateSchedule(_WrapsSchedule):
    """Evaluates `schedule` at the optimizer-update count under gradient accumulation.

    With `gradient_accumulation_steps=k`, Keras 3 (checked on 3.15) calls the
    learning-rate schedule with the micro-batch counter, which runs k times
    faster than the update counter that Adam's bias correction uses; the
    paper's 4000-update warm-up would end after 4000 / k updates. This wrapper
    divides the counter by k.

    Args:
        schedule: a LearningRateSchedule.
        accumulation_steps: int k, the optimizer's gradient_accumulation_steps.
    """

    def __init__(self, schedule, accumulation_steps):
        if int(accumulation_steps) < 1:
            raise ValueError(f"accumulation_steps must be at least 1; got {accumulation_steps}.")
        self.schedule = schedule
        self.accumulation_steps = int(accumulation_steps)

    def __call__(self, step):
        return self.schedule(ops.floor_divide(ops.cast(step, "int64"), self.accumulation_steps))

    def get_config(self):
        return {
            "schedule": keras.saving.serialize_keras_object(self.schedule),
            "accumulation_steps": self.accumulation_steps,
        }


@keras.saving.register_keras_serializable(package="keras_transformer")
class LinearCooldown(_WrapsSchedule):
    """`schedule`, scaled down linearly to zero over the last `cooldown_steps` of `total_steps`.

    lrate(step) = schedule(step) * min(1, (total_steps - step) / cooldown_steps)

    The paper's 100k-update run anneals its rate by the inverse square root
    and averages checkpoints; a run of a few hundred updates ends close to its
    peak rate, with weights as noisy as that rate makes them. Letting the rate
    fall to zero over the end of the run (the cool-down of warmup-stable-decay
    schedules) removes that noise from the last weights. The update numbered
    `total_steps - 1` uses 1 / cooldown_steps of the rate.

    Args:
        schedule: a LearningRateSchedule, in optimizer updates.
        total_steps: int. Updates in the whole run.
        cooldown_steps: int in [1, total_steps].

    References:
        Hägele et al., "Scaling Laws and Compute-Optimal Training Beyond Fixed
        Training Durations", 2024 (linear cool-down after a constant rate).
    """

    def __init__(self, schedule, total_steps, cooldown_steps):
        if not 1 <= int(cooldown_steps) <= int(total_steps):
            raise ValueError(
                f"cooldown_steps must be in [1, total_steps]; got cooldown_steps={cooldown_steps}, "
                f"total_steps={total_steps}."
            )
        self.schedule = schedule
        self.total_steps = int(total_steps)
        self.cooldown_steps = int(cooldown_steps)

    def __call__(self, step):
        remaining = (self.total_steps - ops.cast(step, "float32")) / self.cooldown_steps
        return self.schedule(step) * ops.clip(remaining, 0.0, 1.0)

    def get_config(self):
        return {
            "schedule": keras.saving.serialize_keras_object(self.schedule),
            "total_steps": self.total_steps,
            "cooldown_steps": self.cooldown_steps,
        }


@keras.saving.register_keras_serializable(package="keras_transformer")
class ClockCooldown(_WrapsSchedule):
    """`schedule`, scaled down linearly to zero over the last `cooldown` share
    of a run's training time.

    lrate(step) = schedule(step) * clip((1 - progress) / cooldown, 0, 1)

    `progress` is the share of training's time spent, a non-trainable
    variable that a time budget's clock sets after every update
    (`budget_callback.TimeBudget`), so the rate reaches zero when the time
    ends, whatever the number of updates. The saved config records its value.

    References:
        Li, Yumer and Ramanan, "Budgeted Training", ICLR 2020.
    """

    def __init__(self, schedule, progress=0.0, cooldown=0.5):
        if not 0.0 < float(cooldown) <= 1.0:
            raise ValueError(f"cooldown must be in (0, 1]; got {cooldown}.")
        self.schedule = schedule
        self.cooldown = float(cooldown)
        if not isinstance(progress, keras.Variable):
            progress = keras.Variable(float(progress), trainable=False, dtype="float32", name="budget_progress")
        self.progress = progress

    def __call__(self, step):
        remaining = (1.0 - ops.convert_to_tensor(self.progress)) / self.cooldown
        return self.schedule(step) * ops.clip(remaining, 0.0, 1.0)

    def get_config(self):
        return {"schedule": keras.saving.serialize_keras_object(self.schedule),
                "progress": float(ops.convert_to_numpy(self.progress)), "cooldown": self.cooldown}


def make_schedule(d_model, training, progress=None):
    """The run's schedule: the paper's warm-up and inverse square root, with
    the linear cool-down of `training.cooldown`, counted per update under
    gradient accumulation. `training`: a `config.TrainingSettings`. With
    `progress` (a time budget's clock, `ClockCooldown`), the cool-down is a
    share of training's time; without, of `training.steps`."""
    schedule = TransformerSchedule(d_model, training.warmup_steps, training.learning_rate_scale)
    cooldown_steps = round(training.cooldown * training.steps)
    if progress is not None:
        schedule = ClockCooldown(schedule, progress, training.cooldown)
    elif cooldown_steps:
        schedule = LinearCooldown(schedule, training.steps, cooldown_steps)
    if training.grad_accum > 1:
        schedule = PerUpdateSchedule(schedule, training.grad_accum)
    return schedule


def make_optimizer(d_model, training, progress=None):
    """Adam(0.9, 0.98, 1e-9) on `make_schedule`, accumulating `training.grad_accum` batches per update."""
    return paper_adam(make_schedule(d_model, training, progress),
                      gradient_accumulation_steps=training.grad_accum if training.grad_accum > 1 else None)


def updates_made(optimizer):
    """The updates `optimizer` has applied: its count of steps, which counts
    each batch under gradient accumulation, over the batches per update."""
    accumulation = getattr(optimizer, "gradient_accumulation_steps", None) or 1
    return int(ops.convert_to_numpy(optimizer.iterations)) // accumulation
