"""Serving speed of the TensorFlow paths against CTranslate2, on a trained run's real sentences.

The comparison a user deploying a run makes, in one process, back to back:

- the exported SavedModel, called through `serving_default` as TF Serving
  calls it;
- in-process translation (`decoding.Translator`, what evaluation,
  validation and `translate.py` run);
- CTranslate2 (the optional extra) on the same weights, float32 and int8.

All translate the same sentences with the run's beam search (the paper's
beam and alpha by default), TensorFlow on its default threads (every core; 2 on
the machines this was written on) and CTranslate2 on `threads`: one sentence at a time (batch-1
latency, ms per sentence) and in length-sorted batches of 32 (throughput,
sentences per second). Each figure is the best of `rounds` passes, the
engines taking turns within each round. Ratios
to CTranslate2 float32 carry the claim; the machines are shared and noisy.
The report also counts how many batched translations of each engine equal
the SavedModel's: a speed figure means little for an engine that
translates differently. With a `baseline` run (another model of the same
data, e.g. of other depths), its SavedModel takes its turns in the same
rounds on the same sentences, and the report gives the speed ratio.

Without a trained run, `quick_run` trains a stand-in: the main job's first
updates (`scripts/benchmark.py --serving` with no value does this when the
main job has not run).
"""

import os
import tempfile
import time

import numpy as np

from keras_transformer.config import RunConfig
from keras_transformer.data import sources
from keras_transformer.decoding.batching import in_length_order
from keras_transformer.export import loading, saved_model
from keras_transformer.export.ctranslate2 import ctranslate2_installed, export_translator_ctranslate2
from keras_transformer.modeling import presets
from keras_transformer.run_dir import RunDir


BASELINE = "Baseline SavedModel"


def quick_run(model_dir, steps):
    """Trains the first `steps` updates of the main job (small preset,
    built-in corpus, same seed and learning rates: no cool-down, which the
    main job starts at update 400) into `model_dir`, with no validation,
    test or export; returns `model_dir`. 200 updates take about 3 minutes on
    2 cores, and the main job scores about 89 validation BLEU after them:
    translations of about the trained model's lengths."""
    from keras_transformer.training import recipe  # noqa: PLC0415

    if steps < 1:
        raise ValueError(f"A quick run needs at least 1 update; got {steps}.")
    config = RunConfig(steps=steps, checkpoint_every=steps, cooldown=0.0, bleu_sentences=0, model_dir=model_dir,
                       export_dir="")
    recipe.train(config, verbose=0)
    return model_dir


def read_sentences(path, limit):
    """The first `limit` source sentences (first column) of a TSV file."""
    sentences = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            source = line.rstrip("\n").split("\t")[0]
            if source.strip():
                sentences.append(source)
            if len(sentences) == limit:
                break
    if not sentences:
        raise ValueError(f"{path!r} has no sentences to translate.")
    return sentences


def _seconds(run):
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def _text(output):
    return output.decode("utf-8") if isinstance(output, bytes) else output


def time_engines(found, sentences, batch_size=32, rounds=2):
    """{name: (batch-1 ms per sentence, batch-`batch_size` sentences per second,
    the batched translations as str)} of each `translate(list of str)` in
    `found`, after one warm-up call of each shape class.

    Each figure is the best of `rounds` passes, and the passes take turns:
    every round times every engine once, so a slow spell of a shared machine
    falls on all of them rather than on whichever ran then.
    """
    for translate in found.values():
        translate(sentences[:1])
        translate(sentences[:batch_size])
    single = {name: float("inf") for name in found}
    batched = dict(single)
    outputs = {}
    for _ in range(rounds):
        for name, translate in found.items():
            single[name] = min(single[name], _seconds(lambda: [translate([s]) for s in sentences]))
    for _ in range(rounds):
        for name, translate in found.items():
            def batched_pass():
                outputs[name] = in_length_order(translate, sentences, [len(s) for s in sentences], batch_size)

            batched[name] = min(batched[name], _seconds(batched_pass))
    return {name: (1000.0 * single[name] / len(sentences), len(sentences) / batched[name],
                   [_text(output) for output in outputs[name]]) for name in found}


def engines(model_dir, directory, threads=2, baseline=None):
    """({name: translate(list of str) -> list of UTF-8 bytes}, the run's
    config) for the run in `model_dir`, exported into `directory`, each
    engine loaded as `loading.load_translator` loads it. CTranslate2 runs as
    its users run it, with its own length penalty ("CTranslate2 float32",
    "... int8": the ratios' reference), and reranked under ours as
    `translate.py` runs it ("CTranslate2 float32 reranked"). CTranslate2
    engines are absent without the extra. The run in `baseline`, if given,
    is exported too ("Baseline SavedModel")."""
    translator = loading.load_translator(model_dir)  # in process: a `Translator`
    exported = {"SavedModel": saved_model.export_translator(translator, os.path.join(directory, "saved_model"))}
    if baseline:
        exported[BASELINE] = saved_model.export_translator(loading.load_translator(baseline),
                                                           os.path.join(directory, "baseline"))
    if ctranslate2_installed():
        for quantization in ("float32", "int8"):
            exported[f"CTranslate2 {quantization}"] = export_translator_ctranslate2(
                translator, os.path.join(directory, quantization), quantization)
    loaded = {name: loading.load_translator(exported.pop(name)) for name in ("SavedModel", BASELINE)
              if name in exported}
    loaded = {**loaded, "Translator": translator,
              **{name: loading.load_translator(path, threads=threads, ranking="ctranslate2")
                 for name, path in exported.items()}}
    if exported:
        loaded["CTranslate2 float32 reranked"] = loading.load_translator(exported["CTranslate2 float32"],
                                                                         threads=threads)
    found = {name: lambda batch, engine=engine: [row[0] for row in np.asarray(engine(batch)[0])]
             for name, engine in loaded.items()}
    return found, RunDir(model_dir).load_config()


def _layers(depths):
    return "{}+{} layers".format(*depths)


def serving_figures(model_dir, corpus=None, limit=500, batch_size=32, rounds=2, threads=2, report=print,
                    baseline=None):
    """Times every engine on `limit` sentences: the source side of `corpus`
    (a TSV file), or the run's own test split. Reports a table and ratios;
    returns {engine: {"batch1_ms", "batched_per_s"}}, the ratios, and for
    every other engine how many of its batched translations equal the
    SavedModel's ("<engine> = SavedModel"). The model's depths are "layers";
    with a `baseline` run, its SavedModel is timed too ("SavedModel /
    Baseline SavedModel") and its depths are "baseline_layers"."""
    depths = {}
    with tempfile.TemporaryDirectory() as directory:
        found, config = engines(model_dir, directory, threads, baseline)
        depths["layers"] = presets.run_depths(config)
        if baseline:
            depths["baseline_layers"] = presets.run_depths(RunDir(baseline).load_config())
            report(f"serving: baseline {baseline} ({_layers(depths['baseline_layers'])})")
        if corpus:
            sentences = read_sentences(corpus, limit)
        else:
            sentences = sources.read_split(config.data, "test", limit=limit)[0]
        report(f"serving: {model_dir} ({config.preset}, {_layers(depths['layers'])}, {config.precision}), "
               f"{len(sentences)} sentences{' of ' + corpus if corpus else ' of its test split'}, "
               f"beam {config.beam_size}, alpha {config.alpha}, {threads} threads, best of {rounds}")
        figures, translations = dict(depths), {}
        for name, (single, batched, translations[name]) in time_engines(found, sentences, batch_size,
                                                                        rounds).items():
            figures[name] = {"batch1_ms": single, "batched_per_s": batched}
            report(f"  {name:20s} batch 1: {single:8.2f} ms/sentence   batch {batch_size}: "
                   f"{batched:7.2f} sentences/s")
    reference_outputs = translations["SavedModel"]
    for name, outputs in translations.items():
        if name != "SavedModel":
            same = sum(a == b for a, b in zip(outputs, reference_outputs))
            figures[f"{name} = SavedModel"] = same
            report(f"  {name} translates {same}/{len(sentences)} sentences as the SavedModel does")
    if "CTranslate2 float32" not in figures:
        report('  CTranslate2 figures skipped: pip install -e ".[ctranslate2]"')
    for name, reference in (("Translator", "CTranslate2 float32"), ("SavedModel", "CTranslate2 float32"),
                            ("SavedModel", "CTranslate2 int8"), ("SavedModel", BASELINE)):
        if reference in figures:
            latency = figures[reference]["batch1_ms"] / figures[name]["batch1_ms"]
            throughput = figures[name]["batched_per_s"] / figures[reference]["batched_per_s"]
            figures[f"{name} / {reference}"] = {"batch1": latency, "batched": throughput}
            report(f"  {name} / {reference}: {latency:.2f}x at batch 1 (speed), {throughput:.2f}x at batch "
                   f"{batch_size}")
    return figures
