"""See `python scripts/benchmark.py --help`; the logic lives in benchmarks/main.py (the repository's lab, not
installed) and keras_transformer.cli.benchmark (the package's modes)."""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # quiet TensorFlow start-up logs
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")  # oneDNN kernels on every CPU: docs/benchmarks.md
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository: benchmarks/

from benchmarks.main import benchmark_main  # noqa: E402

if __name__ == "__main__":
    sys.exit(benchmark_main())
