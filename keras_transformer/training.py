"""The paper's training recipe (section 5) as a resumable `model.fit` run.

`train(config)` builds the strategy, the shared vocabulary, the data, the
model and the callbacks, and runs `fit`. One Keras epoch is one checkpoint
interval (`config.checkpoint_every` updates), so every epoch ends with a
validation pass (loss, and BLEU: `validation.BleuValidation`), a kept
checkpoint and a backup; a run killed at any point and started again with the
same command resumes from its last backup. The main job around it (model
choice, test, export) is `main_job.train_and_evaluate`.
"""

import os
import time

import keras
import tensorflow as tf

from keras_transformer import checkpoints, evaluation, fine_tuning, validation
from keras_transformer.config import RUN_CONFIG_FILENAME, RunConfig
from keras_transformer.data import pipeline, sources
from keras_transformer.data.tokenizer import TOKENIZER_FILENAME, Tokenizer, train_sentencepiece
from keras_transformer.losses import LabelSmoothedCrossEntropy
from keras_transformer.metrics import MaskedAccuracy
from keras_transformer.model import Transformer
from keras_transformer.schedule import LinearCooldown, PerUpdateSchedule, TransformerSchedule
from keras_transformer.translator import Translator


def resolve_precision(precision, cpu_flags=None, gpu_capabilities=None):
    """The dtype policy for --precision; "auto" picks mixed_bfloat16 where
    bfloat16 matmuls are native (CPU flags avx512_bf16 or amx_bf16, or every
    GPU at compute capability 8.0 or above), and float32 elsewhere.

    cpu_flags / gpu_capabilities: for tests; read from the machine by default.
    """
    if precision != "auto":
        return precision
    if gpu_capabilities is None:
        gpu_capabilities = [
            tf.config.experimental.get_device_details(gpu).get("compute_capability", (0, 0))
            for gpu in tf.config.list_physical_devices("GPU")
        ]
    if gpu_capabilities:
        return "mixed_bfloat16" if min(gpu_capabilities) >= (8, 0) else "float32"
    if cpu_flags is None:
        try:
            with open("/proc/cpuinfo") as f:
                cpu_flags = f.read()
        except OSError:
            cpu_flags = ""
    native = "avx512_bf16" in cpu_flags or "amx_bf16" in cpu_flags
    return "mixed_bfloat16" if native else "float32"


def make_strategy(name):
    """The tf.distribute strategy called `name` (see config.STRATEGIES)."""
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker":
        if "TF_CONFIG" not in os.environ:
            raise ValueError("--strategy multi_worker needs the TF_CONFIG environment variable; see the README.")
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver()
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    raise ValueError(f"Unknown strategy {name!r}; expected one of default, mirrored, multi_worker, tpu.")


def worker_role(strategy):
    """(is_chief, task_id). Only the chief writes checkpoints, logs and exports."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True, 0
    task_type, task_id = resolver.task_type, resolver.task_id or 0
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return (task_type == "chief") or (task_type == "worker" and task_id == 0 and not has_chief), task_id


def worker_dir(config, strategy):
    """The chief writes to model_dir; other workers to a private folder inside it."""
    is_chief, task_id = worker_role(strategy)
    return config.model_dir if is_chief else os.path.join(config.model_dir, "workers", str(task_id))


def prepare_model_dir(config, directory=None):
    """Creates the run's folder and writes run_config.json into it. A folder
    that already holds a run must hold one this config can resume
    (`RunConfig.check_resumes`); otherwise this raises ValueError and
    touches nothing."""
    directory = directory or config.model_dir
    if os.path.exists(os.path.join(directory, RUN_CONFIG_FILENAME)):
        config.check_resumes(RunConfig.load(directory))
    config.save(directory)


def load_tokenizer(config, directory=None, max_pairs=1_000_000):
    """The run's SentencePiece model. On first use it is copied from
    `config.init_from`, or trained on a uniform sample of at most `max_pairs`
    training pairs drawn from the whole training split (never its first lines)."""
    directory = directory or config.model_dir
    path = os.path.join(directory, TOKENIZER_FILENAME)
    if not os.path.exists(path):
        if config.init_from:
            fine_tuning.copy_vocabulary(config.init_from, path)
        else:
            print(f"Sampling up to {max_pairs:,} training pairs of {config.dataset} for the vocabulary ...",
                  flush=True)
            pairs = sources.sample_training_pairs(config, max_pairs)
            print(f"Training a {config.vocab_size}-piece SentencePiece model on {len(pairs):,} pairs ...",
                  flush=True)
            train_sentencepiece((text for pair in pairs for text in pair), config.vocab_size, path)
    return Tokenizer(path)


def build_model(config, vocab_size):
    """The preset's Transformer over the shared vocabulary, built."""
    overrides = {} if config.dropout is None else {"dropout": config.dropout}
    model = Transformer.from_preset(config.preset, vocab_size=vocab_size, dtype=resolve_precision(config.precision),
                                    **overrides)
    model.build()
    return model


def compile_model(model, config, metrics=()):
    """Adam(0.9, 0.98, 1e-9) on the warm-up schedule (with the run's linear
    cool-down, if any) and the label-smoothed loss."""
    schedule = TransformerSchedule(model.d_model, config.warmup_steps, config.learning_rate_scale)
    cooldown_steps = round(config.cooldown * config.steps)
    if cooldown_steps:
        schedule = LinearCooldown(schedule, config.steps, cooldown_steps)
    if config.grad_accum > 1:
        schedule = PerUpdateSchedule(schedule, config.grad_accum)
    optimizer = keras.optimizers.Adam(
        schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9,
        gradient_accumulation_steps=config.grad_accum if config.grad_accum > 1 else None,
    )
    model.compile(
        optimizer=optimizer,  # Keras wraps it in a LossScaleOptimizer under mixed_float16.
        loss=LabelSmoothedCrossEntropy(config.label_smoothing),
        metrics=list(metrics),
        jit_compile=config.jit_compile,
    )
    return model


class Throughput(keras.callbacks.Callback):
    """Adds `tokens_per_sec` (non-padding target tokens) and `sec_per_step` to the logs.

    It reads the token count that `MaskedAccuracy` keeps, so it costs no extra
    metric. Keras' progress bar, which runs after it, shows both.
    """

    def __init__(self, accuracy_metric, every=10):
        super().__init__()
        self.accuracy_metric = accuracy_metric
        self.every = every

    def on_epoch_begin(self, epoch, logs=None):
        self._start = None  # set after the first step, which includes tracing
        self._figures = {"tokens_per_sec": 0.0, "sec_per_step": 0.0}

    def on_train_batch_end(self, batch, logs=None):
        tokens = float(self.accuracy_metric.tokens.numpy())
        now = time.perf_counter()
        if self._start is None:
            self._start, self._start_batch, self._start_tokens = now, batch, tokens
        elif (batch - self._start_batch) % self.every == 0:
            elapsed = max(now - self._start, 1e-9)
            self._figures = {
                "tokens_per_sec": (tokens - self._start_tokens) / elapsed,
                "sec_per_step": elapsed / (batch - self._start_batch),
            }
        if logs is not None:
            logs.update(self._figures)


def make_callbacks(config, strategy, accuracy_metric, model, tokenizer):
    """Validation BLEU (first, so that later callbacks see val_bleu), backups,
    kept checkpoints, TensorBoard, TerminateOnNaN and throughput figures."""
    directory = worker_dir(config, strategy)
    callbacks = [keras.callbacks.TerminateOnNaN()]
    if config.bleu_sentences:
        sentences, references = evaluation.read_split(config, "validation", limit=config.bleu_sentences)
        decoder = validation.ValidationDecoder(model, tokenizer, config.bleu_beam_size, config.alpha,
                                               config.max_length, config.max_output_extra)
        callbacks.append(validation.BleuValidation(os.path.join(directory, "checkpoints"), sentences, references,
                                                   decoder.translate, patience=config.early_stopping,
                                                   updates_per_epoch=min(config.checkpoint_every, config.steps)))
    return callbacks + [
        # delete_checkpoint=False: the backup also lets a finished run be re-run as a no-op.
        keras.callbacks.BackupAndRestore(os.path.join(directory, "backup"), delete_checkpoint=False),
        checkpoints.KeepLastCheckpoints(os.path.join(directory, "checkpoints"), keep=config.keep_checkpoints),
        keras.callbacks.TensorBoard(os.path.join(directory, "logs"), update_freq=100),
        Throughput(accuracy_metric),
    ]


def describe_training_data(config, stats):
    """One line on the training split: pairs, skipped lines, held-out duplicates removed."""
    if not stats.read:
        return f"Training data: {config.dataset} (tfds; pairs equal to a validation or test pair are removed)"
    skipped = ", ".join(f"{reason}: {count}" for reason, count in sorted(stats.skipped.items())) or "none"
    return (f"Training data: {stats.read:,} pairs from {config.dataset}; skipped lines: {skipped}; "
            f"removed as copies of validation/test pairs: {stats.held_out_duplicates:,}")


def train(config, verbose="auto"):
    """Runs (or resumes) training. Returns (model, tokenizer, strategy, history)."""
    interval = min(config.checkpoint_every, config.steps)
    if config.steps % interval:
        raise ValueError(
            f"steps must be a multiple of checkpoint_every; got steps={config.steps}, "
            f"checkpoint_every={config.checkpoint_every}."
        )
    keras.utils.set_random_seed(config.seed)
    precision = resolve_precision(config.precision)
    print(f"Precision: {precision}" + (" (auto)" if config.precision == "auto" else ""), flush=True)
    strategy = make_strategy(config.strategy)
    print(f"Strategy: {config.strategy}, {strategy.num_replicas_in_sync} replica(s) in sync", flush=True)
    directory = worker_dir(config, strategy)
    if config.init_from:
        fine_tuning.check_compatible(config)
    prepare_model_dir(config, directory)
    tokenizer = load_tokenizer(config, directory)

    _, train_stats = sources.load_split(config, "train")  # a local corpus is scanned here, once
    print(describe_training_data(config, train_stats), flush=True)
    train_batches = pipeline.distributed_batches(
        strategy, lambda: sources.load_split(config, "train")[0], tokenizer, config.batch_tokens,
        config.max_length, training=True, seed=config.seed,
    )
    validation_pairs, _ = sources.load_split(config, "validation")
    validation_batches = pipeline.make_batches(
        validation_pairs, tokenizer, config.batch_tokens, config.max_length, training=False
    )

    with strategy.scope():
        accuracy = MaskedAccuracy()
        model = build_model(config, tokenizer.vocab_size)
        if config.init_from:
            model.load_weights(fine_tuning.initial_weights(config.init_from))
        compile_model(model, config, [accuracy])

    checkpoint_dir = os.path.join(directory, "checkpoints")
    if validation.stopped_early(checkpoint_dir, config.early_stopping):
        print(f"The run in {directory!r} already stopped early; nothing to train.", flush=True)
        model.load_weights(checkpoints.list_checkpoints(checkpoint_dir)[-1])
        return model, tokenizer, strategy, None
    history = model.fit(
        train_batches,
        epochs=config.steps // interval,
        steps_per_epoch=interval * config.grad_accum,
        validation_data=validation_batches,
        callbacks=make_callbacks(config, strategy, accuracy, model, tokenizer),
        verbose=verbose,
    )
    return model, tokenizer, strategy, history


def restore(model_dir, weights=None):
    """(config, model, tokenizer) of a trained run, with the given `.weights.h5`
    file or the run's own choice (`checkpoints.default_weights`)."""
    config = RunConfig.load(model_dir)
    tokenizer = Tokenizer(os.path.join(model_dir, TOKENIZER_FILENAME))
    model = build_model(config, tokenizer.vocab_size)
    model.load_weights(weights or checkpoints.default_weights(model_dir))
    return config, model, tokenizer


def make_translator(config, model, tokenizer, beam_size=None, alpha=None, **options):
    """A Translator with the run's decoding settings (overridable); `options`
    (n_best, sampling) go to `Translator`. `model` may be a list (an ensemble)."""
    return Translator(
        model, tokenizer,
        beam_size=config.beam_size if beam_size is None else beam_size,
        alpha=config.alpha if alpha is None else alpha,
        max_input_length=config.max_length,
        extra_length=config.max_output_extra,
        **options,
    )
