"""See docs/results.md; the logic lives in keras_transformer.cli.results.results_main."""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # quiet TensorFlow start-up logs
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")  # oneDNN kernels on every CPU: docs/benchmarks.md

from keras_transformer.cli.results import results_main  # noqa: E402

if __name__ == "__main__":
    sys.exit(results_main())
