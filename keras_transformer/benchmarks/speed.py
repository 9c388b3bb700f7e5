"""Speed figures measured in one run, on one machine; ratios carry the claims.

Shared machines drift, so every claim compares two things timed in the same
process, back to back:

1. peak matmul throughput of TensorFlow here, float32 and bfloat16;
2. training throughput of a preset (default: base) in float32 and
   mixed_bfloat16, in non-padding target tokens per second, with model FLOPs
   utilisation against (1);
3. an encoder-decoder of the same size built from keras-hub's
   TransformerEncoder/TransformerDecoder, trained the same way;
4. cached against uncached beam search;
5. with a corpus, padding efficiency of bucketed against naive batches;
6. beam search on one set of weights in four engines: ours in float32 and
   mixed_bfloat16, and CTranslate2 (the optional extra) in float32 and int8,
   in output tokens per second;
7. (`benchmarks/streaming.py`, `--streaming-pairs N`) memory and start-up
   time of training on a large local corpus;
8. (`--steps-per-execution N`) `model.fit` with one update per call into the
   graph against N, the lever against Keras' per-batch trip to Python.
9. (`benchmarks/onednn.py`, `--onednn`) TensorFlow's oneDNN kernels off
   against on, each in fresh processes.
"""

import dataclasses
import time

import keras
import numpy as np
import tensorflow as tf

from keras_transformer import decoding
from keras_transformer.config import BATCH_TOKENS, PAPER_ALPHA, PAPER_BEAM_SIZE
from keras_transformer.export import ctranslate2 as ctranslate2_export
from keras_transformer.modeling import presets
from keras_transformer.modeling.special_ids import EOS_ID
from keras_transformer.modeling.transformer import Transformer
from keras_transformer.training.losses import LabelSmoothedCrossEntropy
from keras_transformer.training.optimization import TransformerSchedule


def _timed(function, repeats, warmup=1):
    """Seconds per call of `function()`, after `warmup` untimed calls."""
    for _ in range(warmup):
        function()
    start = time.perf_counter()
    for _ in range(repeats):
        function()
    return (time.perf_counter() - start) / repeats


def matmul_peak(dtype, size=2048, repeats=10):
    """GFLOP/s of a (size x size) @ (size x size) matmul in `dtype`."""
    a = tf.random.normal((size, size), dtype=tf.float32)
    a = tf.cast(a, dtype)
    matmul = tf.function(lambda x: tf.matmul(x, x))
    seconds = _timed(lambda: matmul(a).numpy(), repeats)
    return 2 * size**3 / seconds / 1e9


def synthetic_batches(vocab_size, batch_tokens, length, seed=0):
    """Fixed-shape batches of `length` tokens per row, every token real."""
    rng = np.random.default_rng(seed)
    rows = max(1, batch_tokens // length)
    source = rng.integers(4, vocab_size, size=(rows, length)).astype("int32")
    target = rng.integers(4, vocab_size, size=(rows, length + 1)).astype("int32")
    return (source, target[:, :-1]), target[:, 1:]


def training_flops(config, vocab_size, source_tokens, target_tokens):
    """Approximate training FLOPs of one step: 6 per matmul weight per token it
    multiplies (forward 2, backward 4). Attention's score and value products
    are left out, so the utilisation figures are slight underestimates."""
    d, f = config.d_model, config.d_ff
    encoder_layers, decoder_layers = presets.depths(config)
    encoder_weights = encoder_layers * (4 * d * d + 2 * d * f)  # per source token
    # per target token, with the output projection
    decoder_weights = decoder_layers * (8 * d * d + 2 * d * f) + d * vocab_size
    return 6 * (encoder_weights * source_tokens + decoder_weights * target_tokens)


def _compile(model, d_model):
    model.compile(
        optimizer=keras.optimizers.Adam(TransformerSchedule(d_model), beta_1=0.9, beta_2=0.98, epsilon=1e-9),
        loss=LabelSmoothedCrossEntropy(0.1),
    )
    return model


def _train_throughput(model, batch, steps):
    """Non-padding target tokens per second of `model.train_on_batch` on one batch."""
    (source, target_in), target_out = batch
    seconds = _timed(lambda: model.train_on_batch((source, target_in), target_out), steps, warmup=2)
    return float((target_out != 0).sum()) / seconds, seconds


def ours(config, vocab_size, precision):
    model = Transformer(vocab_size=vocab_size, dtype=precision, **dataclasses.asdict(config))
    model.build()
    return _compile(model, config.d_model)


def fit_throughput(config, vocab_size, precision, batch, steps, steps_per_execution, rounds=2):
    """Non-padding target tokens per second of `model.fit` over `steps` updates
    (best of `rounds` epochs after one untimed), running `steps_per_execution`
    updates per call into the graph. Keras converts each execution's logs to
    Python numbers whatever the callbacks are, so none is added."""
    model = ours(config, vocab_size, precision)
    model.compile(optimizer=model.optimizer, loss=model.loss, steps_per_execution=steps_per_execution)
    dataset = tf.data.Dataset.from_tensors(batch).repeat()
    times = []

    class Clock(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            times.append(time.perf_counter() - self.start)

    model.fit(dataset, steps_per_epoch=steps, epochs=rounds + 1, shuffle=False, verbose=0, callbacks=[Clock()])
    return float((batch[1] != 0).sum()) * steps / min(times[1:])


def steps_per_execution_figures(presets_to_time, vocab_size, batch_tokens, length, steps, steps_per_execution,
                                precision=None, report=print):
    """Section 8: `fit` tokens/s with 1 and with N updates per execution, per
    preset, in `precision` (default: this machine's choice for "auto")."""
    from keras_transformer.modeling.precision import resolve_precision  # noqa: PLC0415

    precision = precision or resolve_precision("auto")
    batch = synthetic_batches(vocab_size, batch_tokens, length)
    figures = {}
    for name in presets_to_time:
        config = presets.get_preset(name)
        rates = {}
        for n in (1, steps_per_execution, 1, steps_per_execution):  # interleaved: the machine drifts
            keras.utils.set_random_seed(0)
            rates[n] = max(rates.get(n, 0.0), fit_throughput(config, vocab_size, precision, batch, steps, n))
        figures[f"{name}_spe_ratio"] = rates[steps_per_execution] / rates[1]
        report(f"8. fit {name:6s} {precision}: {rates[1]:8.0f} target tokens/s at 1 update per execution, "
               f"{rates[steps_per_execution]:8.0f} at {steps_per_execution}: "
               f"{figures[f'{name}_spe_ratio']:.3f}x")
    return figures


def keras_hub_equivalent(config, vocab_size, precision="float32"):
    """The same architecture from keras-hub layers: tied embeddings, sinusoids,
    post-norm encoder and decoder layers, ReLU feed-forward."""
    import keras_hub  # noqa: PLC0415

    policy = keras.DTypePolicy(precision)
    source = keras.Input((None,), dtype="int32")
    target = keras.Input((None,), dtype="int32")
    embedding = keras_hub.layers.ReversibleEmbedding(vocab_size, config.d_model, dtype=policy)
    positions = keras_hub.layers.SinePositionEncoding(dtype=policy)
    scale = float(config.d_model) ** 0.5

    def embed(ids):
        x = embedding(ids) * scale
        return x + positions(x)

    encoder_layers, decoder_layers = presets.depths(config)
    x = embed(source)
    for _ in range(encoder_layers):
        x = keras_hub.layers.TransformerEncoder(config.d_ff, config.num_heads, dropout=config.dropout,
                                                layer_norm_epsilon=config.layer_norm_epsilon, dtype=policy)(
            x, padding_mask=keras.ops.not_equal(source, 0))
    y = embed(target)
    for _ in range(decoder_layers):
        y = keras_hub.layers.TransformerDecoder(config.d_ff, config.num_heads, dropout=config.dropout,
                                                layer_norm_epsilon=config.layer_norm_epsilon, dtype=policy)(
            y, x, decoder_padding_mask=keras.ops.not_equal(target, 0),
            encoder_padding_mask=keras.ops.not_equal(source, 0))
    logits = keras.ops.cast(embedding(y, reverse=True), "float32")
    return _compile(keras.Model((source, target), logits), config.d_model)


def decoding_throughput(config, vocab_size, batch, source_length, output_length, beam_size=PAPER_BEAM_SIZE):
    """Sentences per second of beam search, cached and uncached, with outputs
    forced to `output_length` pieces (the random model rarely ends early)."""
    keras.utils.set_random_seed(0)
    model = Transformer(vocab_size=vocab_size, **dataclasses.asdict(config))
    model.build()
    rng = np.random.default_rng(0)
    source = tf.constant(rng.integers(4, vocab_size, size=(batch, source_length)).astype("int32"))
    results = {}
    for use_cache in (True, False):
        def run():
            ids, _ = decoding.beam_search(model, source, beam_size=beam_size, max_length=output_length,
                                          use_cache=use_cache)
            return ids.numpy()
        results[use_cache] = batch / _timed(run, repeats=2)
    return results[True], results[False]


def decoding_engines(config, vocab_size, batch, source_length, output_length, beam_size=PAPER_BEAM_SIZE,
                     threads=2):
    """Output tokens (EOS left out) per second of beam search (the paper's alpha) over
    one batch, for one set of random weights in four engines: ours in float32
    and mixed_bfloat16 (cached, as served), CTranslate2 float32 and int8 with
    `threads` threads. Outputs stop at `output_length` pieces in every engine;
    each engine's own token count is used. CTranslate2 figures are absent
    when the package is not installed."""
    keras.utils.set_random_seed(0)
    reference = Transformer(vocab_size=vocab_size, **dataclasses.asdict(config))
    reference.build()
    rng = np.random.default_rng(0)
    pieces = rng.integers(4, vocab_size, size=(batch, source_length - 1)).astype("int32")
    source = tf.constant(np.concatenate([pieces, np.full((batch, 1), EOS_ID, "int32")], axis=1))  # (B, S)
    figures = {}
    for precision in ("float32", "mixed_bfloat16"):
        model = Transformer(vocab_size=vocab_size, dtype=precision, **dataclasses.asdict(config))
        model.build()
        model.set_weights(reference.get_weights())

        def run(model=model):
            ids, _ = decoding.beam_search(model, source, beam_size=beam_size, alpha=PAPER_ALPHA,
                                          max_length=output_length)
            ids = ids.numpy()
            return int(((ids != 0) & (ids != EOS_ID)).sum())

        tokens = run()
        figures[f"ours_{precision}"] = tokens / _timed(run, repeats=2, warmup=0)
    if ctranslate2_export.ctranslate2_installed():
        figures.update(_ctranslate2_engines(reference, pieces, source_length, output_length, beam_size, threads))
    return figures


def _ctranslate2_engines(reference, pieces, source_length, output_length, beam_size, threads):
    """`decoding_engines`' CTranslate2 float32 and int8 figures, on `reference`'s weights and (B, S-1) `pieces`."""
    import os  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    import ctranslate2  # noqa: PLC0415  (optional extra)

    vocabulary = [f"<{i}>" for i in range(reference.vocab_size)]
    tokens_in = [[vocabulary[i] for i in row] for row in pieces]
    figures = {}
    with tempfile.TemporaryDirectory() as directory:
        for quantization in ("float32", "int8"):
            spec = ctranslate2_export.transformer_spec(reference, vocabulary, max_positions=source_length +
                                                       output_length + 1)
            path = os.path.join(directory, quantization)
            ctranslate2_export.write_spec(spec, path, quantization)
            translator = ctranslate2.Translator(path, compute_type=quantization, intra_threads=threads)

            def run(translator=translator):
                results = translator.translate_batch(tokens_in, beam_size=beam_size, length_penalty=PAPER_ALPHA,
                                                     max_decoding_length=output_length - 1,
                                                     min_decoding_length=0)
                return sum(len(r.hypotheses[0]) for r in results)

            tokens = run()
            figures[f"ctranslate2_{quantization}"] = tokens / _timed(run, repeats=2, warmup=0)
    return figures


def _training_figures(config, vocab_size, batch_tokens, length, train_steps, peaks, report):
    """`run_benchmark`'s training figures: tokens/s and MFU (of `peaks`' GFLOP/s) of ours in float32 and
    mixed_bfloat16 and of keras-hub's equivalent, and the ratios to keras-hub."""
    figures = {}
    batch = synthetic_batches(vocab_size, batch_tokens, length)
    tokens = batch[1].size
    flops = training_flops(config, vocab_size, batch[0][0].size, tokens)
    for name, build, peak in (
        ("float32", lambda: ours(config, vocab_size, "float32"), peaks["peak_float32_gflops"]),
        ("mixed_bfloat16", lambda: ours(config, vocab_size, "mixed_bfloat16"), peaks["peak_bfloat16_gflops"]),
        ("keras_hub_float32", lambda: keras_hub_equivalent(config, vocab_size), peaks["peak_float32_gflops"]),
    ):
        keras.utils.set_random_seed(0)
        tokens_per_second, seconds = _train_throughput(build(), batch, train_steps)
        figures[f"train_{name}_tokens_per_s"] = tokens_per_second
        figures[f"train_{name}_mfu"] = flops / seconds / 1e9 / peak
        report(f"2. training {name:18s} {tokens_per_second:8.0f} target tokens/s, "
               f"MFU {100 * figures[f'train_{name}_mfu']:.1f}% of its dtype's peak")
    hub = figures["train_keras_hub_float32_tokens_per_s"]
    figures["float32_vs_keras_hub"] = figures["train_float32_tokens_per_s"] / hub
    figures["bfloat16_vs_keras_hub_float32"] = figures["train_mixed_bfloat16_tokens_per_s"] / hub
    report(f"3. vs keras-hub float32: float32 {figures['float32_vs_keras_hub']:.2f}x (goal >= 1.0), "
           f"mixed_bfloat16 {figures['bfloat16_vs_keras_hub_float32']:.2f}x (goal >= 1.8 with bfloat16 support)")
    return figures


def run_benchmark(preset="base", vocab_size=37000, batch_tokens=BATCH_TOKENS, length=32, train_steps=5,
                  decode_batch=8, output_length=40, corpus=None, skip_training=False, engines_batch=32,
                  report=print):
    """Measures everything and reports a table; returns the figures as a dict."""
    config = presets.get_preset(preset)
    figures = {}
    report(f"preset={preset} vocab={vocab_size} batch_tokens={batch_tokens} length={length}")
    figures["peak_float32_gflops"] = matmul_peak(tf.float32)
    figures["peak_bfloat16_gflops"] = matmul_peak(tf.bfloat16)
    report(f"1. peak matmul:          float32 {figures['peak_float32_gflops']:.0f} GFLOP/s, "
           f"bfloat16 {figures['peak_bfloat16_gflops']:.0f} GFLOP/s")

    if not skip_training:
        figures.update(_training_figures(config, vocab_size, batch_tokens, length, train_steps, figures, report))

    cached, uncached = decoding_throughput(config, vocab_size, decode_batch, 30, output_length)
    figures["decode_cached_sentences_per_s"] = cached
    figures["decode_uncached_sentences_per_s"] = uncached
    figures["decode_cached_vs_uncached"] = cached / uncached
    report(f"4. beam search (beam {PAPER_BEAM_SIZE}, {output_length}-piece outputs): cached {cached:.2f} "
           f"sentences/s, uncached {uncached:.2f} sentences/s, ratio {cached / uncached:.2f}x (goal >= 3)")

    if corpus:
        figures.update(padding_efficiency(corpus, batch_tokens, report))

    engines = decoding_engines(config, vocab_size, engines_batch, 30, output_length)
    figures.update({f"decode_{name}_tokens_per_s": value for name, value in engines.items()})
    for name, value in engines.items():
        report(f"6. beam search {name:22s} {value:8.0f} output tokens/s (batch {engines_batch}, "
               f"beam {PAPER_BEAM_SIZE}, {output_length}-piece outputs)")
    if "ctranslate2_float32" in engines:
        best = max(engines["ours_float32"], engines["ours_mixed_bfloat16"])
        figures["ours_best_vs_ctranslate2_float32"] = best / engines["ctranslate2_float32"]
        figures["ours_best_vs_ctranslate2_int8"] = best / engines["ctranslate2_int8"]
        figures["ctranslate2_int8_vs_float32"] = engines["ctranslate2_int8"] / engines["ctranslate2_float32"]
        report(f"6. ours (best) / CTranslate2 float32 {figures['ours_best_vs_ctranslate2_float32']:.2f}x "
               f"(goal >= 1.0), / CTranslate2 int8 {figures['ours_best_vs_ctranslate2_int8']:.2f}x; "
               f"CTranslate2 int8 / float32 {figures['ctranslate2_int8_vs_float32']:.2f}x")
    else:
        report('6. CTranslate2 figures skipped: pip install -e ".[ctranslate2]"')
    return figures


def padding_efficiency(corpus, batch_tokens, report=print, vocab_size=8000, max_length=256):
    """Bucketed against naive batches on a local TSV corpus."""
    import os  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    from keras_transformer.data import pipeline, sources  # noqa: PLC0415
    from keras_transformer.data.tokenizer import Tokenizer, train_sentencepiece  # noqa: PLC0415

    pairs, _ = sources.load_pairs(corpus, "train", held_out=0)
    texts = [t.decode("utf-8") for pair in pairs.as_numpy_iterator() for t in pair]
    with tempfile.TemporaryDirectory() as directory:
        path = train_sentencepiece(texts, vocab_size, os.path.join(directory, "spm.model"))
        tokenizer = Tokenizer(path)
        bucketed = pipeline.batch_stats(pipeline.make_batches(pairs, tokenizer, batch_tokens, max_length, False))
        naive = pipeline.batch_stats(
            pipeline.naive_batches(pairs, tokenizer, max_length, max(1, bucketed.pairs // bucketed.batches)))
    report(f"5. padding efficiency on {corpus}: bucketed {bucketed.padding_efficiency:.3f}, "
           f"naive {naive.padding_efficiency:.3f} (goal >= 0.9)")
    return {"padding_efficiency": bucketed.padding_efficiency, "naive_padding_efficiency": naive.padding_efficiency}
