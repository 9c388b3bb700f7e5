"""The paper's training recipe (section 5) as a resumable `model.fit` run.

`train(...)` builds the shared vocabulary, the data, the model and the
callbacks, and runs `fit` under the strategy it is given. One Keras epoch is one checkpoint
interval (`TrainingSettings.interval` updates), so every epoch ends with a
validation pass (loss, and BLEU: `bleu_validation.BleuValidation`), a kept
checkpoint and a backup; a run killed at any point and started again with
the same command resumes from its last backup. The end-to-end job around
it (model choice, test, export) is `recipe.train_and_evaluate`.

Each function takes the settings sections it uses (`config.DataSettings`,
`ModelSettings`, `TrainingSettings`, `ValidationSettings`,
`DecodingSettings`) and the run folder (`run_dir.RunDir`).
"""

import warnings

import keras

from keras_transformer.data import pipeline, sources
from keras_transformer.decoding.restore import make_translator
from keras_transformer.modeling.transformer import build_transformer
from keras_transformer.training import bleu_validation, budget, checkpoints, fine_tuning
from keras_transformer.training.budget_callback import TimeBudget
from keras_transformer.training.losses import LabelSmoothedCrossEntropy
from keras_transformer.training.metrics import MaskedAccuracy
from keras_transformer.training.optimization import make_optimizer
from keras_transformer.training.throughput import Throughput
from keras_transformer.training.vocabulary import load_tokenizer


# Under a time budget an interval (a Keras epoch) ends when the clock says
# (`budget_callback.TimeBudget`), long before this many updates.
UNBOUNDED_INTERVAL = 2**31 - 1


def compile_model(model, training, metrics=(), progress=None):
    """Adam(0.9, 0.98, 1e-9) on the warm-up schedule (with the run's linear
    cool-down, if any; with a time budget's `progress` variable, one over
    training's time: `optimization.ClockCooldown`) and the label-smoothed loss."""
    model.compile(
        # Keras wraps it in a LossScaleOptimizer under mixed_float16.
        optimizer=make_optimizer(model.d_model, training, progress),
        loss=LabelSmoothedCrossEntropy(training.label_smoothing),
        metrics=list(metrics),
        jit_compile=training.jit_compile,
    )
    return model


def make_callbacks(run_dir, data, training, validation, decoding, accuracy_metric, model, tokenizer):
    """Validation BLEU (first, so that later callbacks see val_bleu), backups,
    kept checkpoints, TensorBoard, TerminateOnNaN and throughput figures.
    With a time budget the validation also times the run's beam search,
    which prices the work after training (`budget.after_training`).

    run_dir: this worker's `RunDir`."""
    callbacks = [keras.callbacks.TerminateOnNaN()]
    if validation.bleu_sentences:
        sentences, references = sources.read_split(data, "validation", limit=validation.bleu_sentences)
        # The one Translator, greedy at beam 1 (cheap), as the export would translate otherwise.
        translator = make_translator(decoding, model, tokenizer, beam_size=validation.bleu_beam_size,
                                     greedy=validation.bleu_beam_size == 1)
        beam_translate = None
        if training.time_budget:  # the budget prices the beam decodes after training from this one's timing
            beam = make_translator(decoding, model, tokenizer)

            def beam_translate(texts):
                return beam.translate(texts, progress=False).best
        callbacks.append(bleu_validation.BleuValidation(
            run_dir, sentences, references, lambda texts: translator.translate(texts, progress=False).best,
            patience=validation.early_stopping,
            updates_per_interval=None if training.time_budget else training.interval,
            beam_translate=beam_translate))
    return callbacks + [
        # delete_checkpoint=False: the backup also lets a finished run be re-run as a no-op.
        keras.callbacks.BackupAndRestore(run_dir.backup_dir, delete_checkpoint=False),
        checkpoints.KeepLastCheckpoints(run_dir, keep=training.keep_checkpoints),
        keras.callbacks.TensorBoard(run_dir.logs_dir, update_freq=100),
        Throughput(accuracy_metric),
    ]


def describe_training_data(data, stats):
    """One line on the training split: pairs, skipped lines, held-out duplicates removed."""
    if not stats.read:
        return f"Training data: {data.dataset} (tfds; pairs equal to a validation or test pair are removed)"
    skipped = ", ".join(f"{reason}: {count}" for reason, count in sorted(stats.skipped.items())) or "none"
    return (f"Training data: {stats.read:,} pairs from {data.dataset}; skipped lines: {skipped}; "
            f"removed as copies of validation/test pairs: {stats.held_out_duplicates:,}")


def train(data, model_settings, training, validation, decoding, run_dir, strategy, verbose="auto",
          budget_start=None):
    """Runs (or resumes) training in `run_dir` (this worker's `RunDir`, which
    already records the run: `recipe.start_run`) under `strategy`. Returns
    (model, tokenizer), the model with its trained weights (the last
    checkpoint's when there was nothing left to train). The learning curve is in the run
    folder (TensorBoard logs; validation scores in its validation record,
    `plots.history.read_curve`), not returned.

    With `training.time_budget`, the run continues the budget record in the
    run folder (`budget.Record`, started by the recipe): its clock
    (`budget_callback.TimeBudget`) ends the intervals at shares of
    training's time and training when that is spent; `budget_start` is the
    `time.monotonic()` at which this process began spending the budget.

    Takes the sections it uses: `config.DataSettings`, `ModelSettings` (its
    precision already resolved), `TrainingSettings`, `ValidationSettings`
    and `DecodingSettings` (the validation decoding's lengths and alpha)."""
    budgeted = bool(training.time_budget)
    if not budgeted and training.steps % training.interval:
        raise ValueError(
            f"steps must be a multiple of checkpoint_every; got steps={training.steps}, "
            f"checkpoint_every={training.checkpoint_every}."
        )
    keras.utils.set_random_seed(training.seed)
    tokenizer = load_tokenizer(data, run_dir, training.init_from)
    train_batches, validation_batches = make_data(data, tokenizer, strategy)
    model, accuracy, progress = build_model(model_settings, training, tokenizer.vocab_size, strategy)
    if finished(run_dir, training, validation):
        model.load_weights(run_dir.checkpoints()[-1])
        return model, tokenizer
    callbacks = make_callbacks(run_dir, data, training, validation, decoding, accuracy, model, tokenizer)
    epochs, interval = training.steps // training.interval, training.interval
    if budgeted:
        epochs, interval = budget.INTERVALS, UNBOUNDED_INTERVAL
        callbacks.append(TimeBudget(run_dir, progress, batches_per_update=training.grad_accum,
                                    process_start=budget_start, verbose=verbose != 0))
        verbose = 0  # the clock shows training's progress; Keras' bar would count to UNBOUNDED_INTERVAL
    with warnings.catch_warnings():
        # Keras learns the length of the validation batches (bucketed by
        # length, so of unknown cardinality) on its first pass over them and
        # says "Your input ran out of data; interrupting training" when it
        # does. Nothing is interrupted: the training batches repeat forever
        # and validation ends where it should.
        warnings.filterwarnings("ignore", message="Your input ran out of data", category=UserWarning)
        model.fit(train_batches, epochs=epochs, steps_per_epoch=interval * training.grad_accum,
                  validation_data=validation_batches,
                  shuffle=False,  # the pipeline shuffles; Keras cannot shuffle a tf.data input, and warns
                  callbacks=callbacks, verbose=verbose)
    return model, tokenizer


def build_model(model_settings, training, vocab_size, strategy):
    """(the compiled model, its accuracy metric, and a time budget's
    progress variable or None), built under `strategy`."""
    with strategy.scope():
        accuracy = MaskedAccuracy()
        model = build_transformer(model_settings.preset, vocab_size, model_settings.precision,
                                  **model_settings.overrides())
        if training.init_from:
            model.load_weights(fine_tuning.initial_weights(training.init_from))
        progress = None
        if training.time_budget:
            progress = keras.Variable(0.0, trainable=False, dtype="float32", name="budget_progress")
        compile_model(model, training, [accuracy], progress)
    return model, accuracy, progress


def make_data(data, tokenizer, strategy):
    """(training batches, repeating and distributed over `strategy`; validation batches)."""
    _, train_stats = sources.load_split(data, "train")  # a local corpus is scanned here, once
    print(describe_training_data(data, train_stats), flush=True)
    train_batches = pipeline.distributed_batches(
        strategy, lambda: sources.load_split(data, "train")[0], tokenizer, data.batch_tokens,
        data.max_length, training=True, seed=data.seed,
    )
    validation_pairs, _ = sources.load_split(data, "validation")
    validation_batches = pipeline.make_batches(
        validation_pairs, tokenizer, data.batch_tokens, data.max_length, training=False
    )
    return train_batches, validation_batches


def finished(run_dir, training, validation):
    """Whether the run in `run_dir` has nothing left to train: it stopped
    early, or spent its time budget (saying so)."""
    if bleu_validation.stopped_early(run_dir, validation.early_stopping):
        print(f"The run in {run_dir.path!r} already stopped early; nothing to train.", flush=True)
        return True
    if training.time_budget and budget.load(run_dir).stopped and run_dir.checkpoints():
        print(f"The run in {run_dir.path!r} has spent its time budget; nothing to train.", flush=True)
        return True
    return False
