"""The lab: harnesses that drive another toolkit or child processes, beside the package and not installed.

- `eole_peer`: this package's recipe against eole at the same budget (`--peer-eole`);
- `onednn`: TensorFlow's oneDNN kernels off against on, each in a fresh process (`--onednn`);
- `streaming`: memory and start-up time of training on a large corpus, in fresh processes (`--streaming-pairs`);
- `main`: `scripts/benchmark.py`, the package's benchmark modes (`keras_transformer.cli.benchmark`) and these.

They import the package; the package never imports them.
"""
