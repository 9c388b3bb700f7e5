"""Memory and start-up time of training on a large local corpus.

A local corpus is streamed (`data.local_corpus`), so peak memory should not
grow with the corpus and the first update should come soon after the one
scanning pass. This times `trainer.train` for one update, in a fresh
process each, on two generated TSV files of N/10 and N pairs with the same
vocabulary (trained beforehand, as "once the vocabulary exists"), and
reports peak RSS and seconds to the first update for both, and their ratios.
"""

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

from keras_transformer.data.numerals_en_de import generator as corpus
from keras_transformer.run_dir import RunDir

# The child ends at its first update: what follows (the model choice and the
# test, decoding with a model of one update) is not training's start.
_CHILD = """
import json, os, resource, sys, time
start = time.perf_counter()
import keras
from keras_transformer.config import RunConfig
from keras_transformer.training import recipe, trainer


class FirstUpdate(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        print(json.dumps({"seconds": time.perf_counter() - start,
                          "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}), flush=True)
        os._exit(0)


make_callbacks = trainer.make_callbacks
trainer.make_callbacks = lambda *args, **kwargs: make_callbacks(*args, **kwargs) + [FirstUpdate()]
recipe.train(RunConfig(**json.loads(sys.argv[1])), verbose=0)
"""


def write_generated_tsv(path, pairs, seed=0):
    """`pairs` lines of the built-in corpus' templates (repeats allowed), written as TSV."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(int(pairs)):
            english, german = corpus.random_pair(rng)
            f.write(f"{english}\t{german}\n")
    return path


def first_update(tsv, vocabulary, model_dir, preset="small"):
    """{"seconds", "peak_rss_gb"} of a fresh process that trains one update on `tsv`:
    seconds from the process' start to the end of that update (imports,
    the corpus scan, the shuffle buffer's filling and the step's tracing
    included), and peak RSS until then."""
    os.makedirs(model_dir)
    shutil.copyfile(vocabulary, RunDir(model_dir).vocabulary_path)
    config = {"dataset": tsv, "preset": preset, "steps": 1, "checkpoint_every": 1, "bleu_sentences": 0,
              "average_last": 1, "model_dir": model_dir, "export_dir": ""}
    result = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(config)], capture_output=True, text=True,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    if result.returncode:
        raise RuntimeError(f"training on {tsv} failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def streaming_figures(pairs, report=print, preset="small"):
    """Section 7 of the benchmark; returns its figures."""
    from keras_transformer.data.tokenizer import train_sentencepiece  # noqa: PLC0415

    figures = {}
    with tempfile.TemporaryDirectory() as directory:
        sizes = {"small": max(1, int(pairs) // 10), "large": int(pairs)}
        paths = {}
        for name, size in sizes.items():
            start = time.perf_counter()
            paths[name] = write_generated_tsv(os.path.join(directory, f"{name}.tsv"), size)
            report(f"7. wrote {size:,} generated pairs in {time.perf_counter() - start:.0f} s")
        vocabulary = train_sentencepiece((s for pair in corpus.generate("train", 5000) for s in pair), 1000,
                                         os.path.join(directory, "sentencepiece.model"))
        for name, size in sizes.items():
            figure = first_update(paths[name], vocabulary, os.path.join(directory, f"run-{name}"), preset)
            figures[f"streaming_{name}_pairs"] = size
            figures[f"streaming_{name}_seconds_to_first_update"] = figure["seconds"]
            figures[f"streaming_{name}_peak_rss_gb"] = figure["peak_rss_gb"]
            report(f"7. {size:>10,} pairs: first update after {figure['seconds']:6.1f} s, "
                   f"peak RSS {figure['peak_rss_gb']:.2f} GB")
    figures["streaming_rss_ratio"] = (figures["streaming_large_peak_rss_gb"]
                                      / figures["streaming_small_peak_rss_gb"])
    report(f"7. {sizes['large'] // sizes['small']}x the pairs: {figures['streaming_rss_ratio']:.2f}x the peak RSS "
           f"(goal: flat; under 4 GB at 4.5M pairs), first update after "
           f"{figures['streaming_large_seconds_to_first_update']:.0f} s (goal: under 120 s)")
    return figures
