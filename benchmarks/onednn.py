"""TensorFlow's oneDNN kernels off against on (`TF_ENABLE_ONEDNN_OPTS`), each in a fresh process.

TensorFlow turns its oneDNN CPU kernels on by itself only on CPUs with
AVX512_VNNI, AVX512_BF16 or AMX (TensorFlow 2.9's release notes); on other
x86 CPUs, such as AVX2 ones, they stay off unless the environment variable
says 1. `scripts/*.py` set it to 1 before TensorFlow loads, unless it is
already set. The variable is read once,
when TensorFlow starts, so the two settings cannot be timed in one process:
`onednn_figures` starts a child process per setting, the two settings in
turn (the machine drifts), and keeps each setting's best. Each child trains
a preset in float32 with `model.fit` (as `speed.fit_throughput`) and times
the cached beam search of its random weights, and says whether oneDNN was
on in it.
"""

import json
import os
import subprocess
import sys

ENV = "TF_ENABLE_ONEDNN_OPTS"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
SETTINGS = ("0", "1")  # off, on


def measure(preset, vocab_size, batch_tokens, length, steps, decode_batch, output_length):
    """In this process: {"onednn": whether TensorFlow's oneDNN kernels are on,
    "train_tokens_per_sec": `speed.fit_throughput` of `preset` in float32,
    "decode_sentences_per_sec": cached beam search (beam 4) of its random
    weights on `decode_batch` sentences of `length` pieces, forced to
    `output_length` output pieces}."""
    import dataclasses  # noqa: PLC0415

    import keras  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415
    import tensorflow as tf  # noqa: PLC0415
    from tensorflow.python.util import _pywrap_util_port  # noqa: PLC0415

    from keras_transformer import decoding  # noqa: PLC0415
    from keras_transformer.benchmarks import speed  # noqa: PLC0415
    from keras_transformer.config import PAPER_BEAM_SIZE  # noqa: PLC0415
    from keras_transformer.modeling import presets  # noqa: PLC0415
    from keras_transformer.modeling.transformer import Transformer  # noqa: PLC0415

    config = presets.get_preset(preset)
    keras.utils.set_random_seed(0)
    batch = speed.synthetic_batches(vocab_size, batch_tokens, length)
    train = speed.fit_throughput(config, vocab_size, "float32", batch, steps, 1)
    keras.utils.set_random_seed(0)
    model = Transformer(vocab_size=vocab_size, **dataclasses.asdict(config))
    model.build()
    rng = np.random.default_rng(0)
    source = tf.constant(rng.integers(4, vocab_size, size=(decode_batch, length)).astype("int32"))

    def search():
        return decoding.beam_search(model, source, beam_size=PAPER_BEAM_SIZE, max_length=output_length)[0].numpy()

    decode = decode_batch / speed._timed(search, repeats=2)  # after one untimed, tracing search
    return {"onednn": bool(_pywrap_util_port.IsMklEnabled()), "train_tokens_per_sec": train,
            "decode_sentences_per_sec": decode}


def measure_in_child(setting, preset, vocab_size, batch_tokens, length, steps, decode_batch, output_length):
    """`measure` in a fresh Python process whose TF_ENABLE_ONEDNN_OPTS is `setting`."""
    arguments = [str(a) for a in (preset, vocab_size, batch_tokens, length, steps, decode_batch, output_length)]
    path = os.pathsep.join(filter(None, (ROOT, os.environ.get("PYTHONPATH"))))  # where `benchmarks` is
    done = subprocess.run([sys.executable, "-m", "benchmarks.onednn", *arguments],
                          env=dict(os.environ, **{ENV: setting, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": path}),
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"The {ENV}={setting} child failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def onednn_figures(preset, vocab_size, batch_tokens, length, steps, decode_batch, output_length, rounds=2,
                   measure=measure_in_child, report=print):
    """Section 9: float32 training and beam-search throughput with oneDNN off
    and on, `rounds` children per setting in turn, each setting's best kept.
    Returns {"off": figures, "on": figures, "train_ratio", "decode_ratio"} (on over off).
    measure: (setting, preset, ...) -> `measure`'s dict (default: in a child)."""
    if int(rounds) < 1:
        raise ValueError(f"rounds must be at least 1; got {rounds}.")
    best = {}
    for round_ in range(int(rounds)):
        for setting in SETTINGS:  # a progress line: each child takes minutes at the small preset's size
            print(f"oneDNN {'on' if setting == '1' else 'off'}: process {round_ + 1} of {rounds} ...",
                  file=sys.stderr, flush=True)
            figures = measure(setting, preset, vocab_size, batch_tokens, length, steps, decode_batch, output_length)
            if figures["onednn"] != (setting == "1"):
                raise RuntimeError(f"{ENV}={setting} left oneDNN {'on' if figures['onednn'] else 'off'}.")
            kept = best.setdefault(setting, dict(figures))
            for key in ("train_tokens_per_sec", "decode_sentences_per_sec"):
                kept[key] = max(kept[key], figures[key])
    off, on = best["0"], best["1"]
    result = {"off": off, "on": on, "train_ratio": on["train_tokens_per_sec"] / off["train_tokens_per_sec"],
              "decode_ratio": on["decode_sentences_per_sec"] / off["decode_sentences_per_sec"]}
    report(f"9. oneDNN, {preset} float32, best of {rounds} fresh processes each: fit {off['train_tokens_per_sec']:.0f} "
           f"target tokens/s off, {on['train_tokens_per_sec']:.0f} on: {result['train_ratio']:.3f}x; beam search "
           f"{off['decode_sentences_per_sec']:.2f} sentences/s off, {on['decode_sentences_per_sec']:.2f} on: "
           f"{result['decode_ratio']:.3f}x")
    return result


if __name__ == "__main__":  # the child of `measure_in_child`
    name, *numbers = sys.argv[1:]
    print(json.dumps(measure(name, *(int(n) for n in numbers))))
