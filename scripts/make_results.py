"""See docs/results.md; the logic lives in keras_transformer.cli.results.results_main."""

import sys

from keras_transformer.cli.results import results_main

if __name__ == "__main__":
    sys.exit(results_main())
