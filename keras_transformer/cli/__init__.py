"""Command-line entry points. Each parses its flags and calls one library function.

`scripts/<name>.py` and the console scripts of setup.cfg (kt-train,
kt-translate, ...) both call these. One module per family of commands:
`train`, `decode` (translate, evaluate, plot_attention), `score`, `export`
(export, average_checkpoints), `data` (mix_backtranslation, make_glossary), `history` (plot_history) and
`benchmark`; `common` holds the shared flags, and `reference` writes
docs/reference.md from all of them (scripts/make_reference.py).
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow is imported

from keras_transformer.cli.benchmark import benchmark_main  # noqa: E402
from keras_transformer.cli.data import make_glossary_main, mix_backtranslation_main  # noqa: E402
from keras_transformer.cli.decode import evaluate_main, plot_attention_main, translate_main  # noqa: E402
from keras_transformer.cli.export import average_main, export_main  # noqa: E402
from keras_transformer.cli.history import plot_history_main  # noqa: E402
from keras_transformer.cli.score import score_main  # noqa: E402
from keras_transformer.cli.train import train_main  # noqa: E402

# scripts/<name>.py -> its entry point, in the order of docs/reference.md.
SCRIPTS = {"train": train_main, "translate": translate_main, "evaluate": evaluate_main, "score": score_main,
           "export": export_main, "average_checkpoints": average_main, "mix_backtranslation": mix_backtranslation_main,
           "make_glossary": make_glossary_main, "plot_attention": plot_attention_main,
           "plot_history": plot_history_main, "benchmark": benchmark_main}

__all__ = ["SCRIPTS", "average_main", "benchmark_main", "evaluate_main", "export_main", "make_glossary_main",
           "mix_backtranslation_main", "plot_attention_main", "plot_history_main", "score_main", "train_main",
           "translate_main"]
