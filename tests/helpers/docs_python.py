"""`python` as the documentation's shell commands see it in tests/test_docs.py.

The test puts a `python` on PATH that runs this file with the command's own
arguments (a script, or `-c CODE`), so each documented line runs word for
word in bash. This adds only
what the test machine lacks, chosen by environment variables:

- KT_TEST_MOCK_TFDS=N: tfds datasets are `tfds.testing.mock_data` with N
  random examples per split, so `--dataset wmt14_translate/de-en` never
  downloads;
- KT_TEST_LOGICAL_CPUS=N: the CPU is split into N logical devices, so
  `--strategy mirrored` has N replicas as it would on N GPUs;
- KT_TEST_SCALE='{"train.py": ["--preset", "tiny", ...]}': flags appended to
  that script's command. argparse keeps a repeated flag's last value, so these
  scale a paper-sized run down and leave every other flag as written;
- KT_TEST_PROBE_SECONDS=S: a time budget's probe says S seconds an update
  (`budget.probe_seconds_per_update`), so the recipe a test checks is the
  one a machine of that speed gets, whatever machine runs the test.
"""

import contextlib
import json
import os
import runpy
import sys


def main():
    argv = sys.argv[1:]
    if argv[:1] == ["-c"] and len(argv) >= 2:  # `python -c CODE`, as the interpreter runs it
        sys.argv = ["-c"] + argv[2:]
        exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})  # noqa: S102
        return
    if not argv or not argv[0].endswith(".py"):
        raise SystemExit(f"docs_python runs `python SCRIPT.py ARGS...` or `python -c CODE`; got {argv!r}")
    argv += json.loads(os.environ.get("KT_TEST_SCALE", "{}")).get(os.path.basename(argv[0]), [])
    cpus = int(os.environ.get("KT_TEST_LOGICAL_CPUS", "0"))
    if cpus:
        import tensorflow as tf

        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * cpus)
    mock = contextlib.nullcontext()
    if os.environ.get("KT_TEST_MOCK_TFDS"):
        import tensorflow_datasets as tfds

        mock = tfds.testing.mock_data(num_examples=int(os.environ["KT_TEST_MOCK_TFDS"]))
    if os.environ.get("KT_TEST_PROBE_SECONDS"):
        from keras_transformer.training import budget

        seconds = float(os.environ["KT_TEST_PROBE_SECONDS"])
        budget.probe_seconds_per_update = lambda model, batch, **timing: seconds
    sys.argv = argv
    with mock:
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
