"""The cost of lexically constrained beam search against plain beam search, on a trained run's real sentences.

`constrained_figures` translates the same sentences with the run's beam
search twice, back to back in one process (`serving.time_engines`: the
passes take turns, the best of `rounds` counts): without constraints,
and with two constraints a sentence, the two longest words (of at least
four letters) of its reference, as a translator's terms would be. It
reports batch-1 latency and batch-32 throughput of both, their ratios
(the goal: constrained search at most 2x plain beam search's time at
batch 32), and the term-use rate of both outputs.
"""

import re

import numpy as np
import tensorflow as tf

from keras_transformer.benchmarks.serving import time_engines
from keras_transformer.data import sources
from keras_transformer.data.local_corpus import read_held_out
from keras_transformer.decoding.terminology import term_use
from keras_transformer.decoding.translator import PHRASE_SEPARATOR
from keras_transformer.export import loading
from keras_transformer.run_dir import RunDir

_LONG_WORD = re.compile(r"[^\W\d_]{4,}")


def reference_terms(reference, count=2):
    """The `count` longest words of at least four letters of `reference`, in
    their order there (fewer if it has fewer)."""
    words = list(dict.fromkeys(_LONG_WORD.findall(reference)))
    longest = sorted(words, key=lambda word: (-len(word), words.index(word)))[:count]
    return [word for word in words if word in longest]


def constrained_figures(model_dir, corpus=None, limit=300, batch_size=32, rounds=2, report=print):
    """Times plain and constrained beam search (see the module docstring) on
    `limit` pairs of `corpus` (a TSV file) or of the run's test split that
    have two such words. Returns {"beam search" and "constrained": {"batch1_ms",
    "batched_per_s", "term_use"}, "ratio": {"batch1", "batched"}}."""
    translator = loading.load_translator(model_dir)
    config = RunDir(model_dir).load_config()
    pairs = read_held_out(corpus) if corpus else list(zip(*sources.read_split(config.data, "test")))
    chosen = [(source, reference_terms(reference)) for source, reference in pairs
              if len(reference_terms(reference)) == 2][:limit]
    if not chosen:
        raise ValueError("No pair has two words of at least four letters in its reference to constrain.")
    sentences = [source for source, _ in chosen]
    terms = dict(chosen)
    constrained = translator.compiled_constrained()

    def plain(batch):
        return [row[0] for row in np.asarray(translator(batch)[0])]

    def with_terms(batch):
        phrases = [PHRASE_SEPARATOR.join(terms[sentence]) for sentence in batch]
        out = constrained(tf.constant(batch), tf.constant(phrases), tf.constant([""] * len(batch)))
        return [row[0] for row in np.asarray(out[0])]

    report(f"constrained search: {model_dir} ({config.preset}, {config.precision}), {len(sentences)} sentences "
           f"of {corpus or 'its test split'} with 2 constraints each, beam {config.beam_size}, alpha "
           f"{config.alpha}, best of {rounds}")
    figures = {}
    for name, (single, batched, outputs) in time_engines({"beam search": plain, "constrained": with_terms},
                                                         sentences, batch_size, rounds).items():
        used, total = term_use(outputs, [terms[s] for s in sentences])
        figures[name] = {"batch1_ms": single, "batched_per_s": batched, "term_use": 100.0 * used / total}
        report(f"  {name:12s} batch 1: {single:8.2f} ms/sentence   batch {batch_size}: {batched:7.2f} sentences/s"
               f"   term use {100.0 * used / total:6.2f}% of {total}")
    plain_figures, constrained_figures_ = figures["beam search"], figures["constrained"]
    figures["ratio"] = {"batch1": constrained_figures_["batch1_ms"] / plain_figures["batch1_ms"],
                        "batched": plain_figures["batched_per_s"] / constrained_figures_["batched_per_s"]}
    report(f"  constrained / beam search time: {figures['ratio']['batch1']:.2f}x at batch 1, "
           f"{figures['ratio']['batched']:.2f}x at batch {batch_size} (goal <= 2.0 at batch 32)")
    return figures
