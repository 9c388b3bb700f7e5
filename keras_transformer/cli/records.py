"""Records: one small JSON file per measuring command, the one home of a published figure.

`train.py` writes one into its run folder (`record.json`) and, with
`--record DIR`, a copy into DIR; `evaluate.py` and every mode of
`benchmark.py` write one into DIR with `--record DIR`. The repository's
`results/` folder holds the records the docs cite, and
`scripts/make_results.py` builds the docs' tables from them (`cli.results`).

A record holds what a reader needs to trust and repeat its figures:
- "command": the command line, as a user types it;
- "version" and "commit" (the checkout's, "-dirty" when it had changes;
  None outside a git checkout), "date" (UTC);
- "machine": the CPU's model name, family and model, the vector and matrix
  flags that choose TensorFlow's kernels, the threads, and any GPUs;
- "precision": the dtype policy the figures were computed in;
- "corpus": the data and its split;
- the figures, with "dev" and "test" scores apart for a trained model.
"""

import datetime
import json
import os
import re
import shlex
import subprocess

from keras_transformer import __version__
from keras_transformer.files import atomic_open

KINDS = ("train", "evaluate", "speed", "serving", "constrained", "onednn", "eole")
# The CPU flags that choose TensorFlow's CPU kernels and `--precision auto`.
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def cpu_info(text=None):
    """{"cpu": model name, "family", "model", "flags": those of `CPU_FLAGS` it
    has} from /proc/cpuinfo's first processor (`text`: that file's text)."""
    if text is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as f:
                text = f.read()
        except OSError:
            import platform  # noqa: PLC0415

            return {"cpu": platform.processor() or platform.machine(), "family": None, "model": None, "flags": []}
    first = text.split("\n\n")[0]
    fields = dict(re.findall(r"^([^\t:]+?)\s*:\s*(.*)$", first, re.M))
    flags = set(fields.get("flags", "").split())
    number = lambda name: int(fields[name]) if fields.get(name, "").isdigit() else None  # noqa: E731
    return {"cpu": fields.get("model name", "unknown"), "family": number("cpu family"), "model": number("model"),
            "flags": [flag for flag in CPU_FLAGS if flag in flags]}


def machine():
    """This machine, as a record names it: the CPU (`cpu_info`), the threads
    this process may run on, and the GPUs TensorFlow sees."""
    import tensorflow as tf  # noqa: PLC0415

    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    gpus = [tf.config.experimental.get_device_details(gpu).get("device_name", gpu.name)
            for gpu in tf.config.list_physical_devices("GPU")]
    return {**cpu_info(), "threads": threads, "gpus": gpus}


def commit():
    """The commit of the git checkout the package runs from, with "-dirty"
    when its tracked files have changes; None outside a checkout."""
    folder = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(["git", "-C", folder, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30)
        if head.returncode:
            return None
        changed = subprocess.run(["git", "-C", folder, "status", "--porcelain", "--untracked-files=no"],
                                 capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("-dirty" if changed else "")


def command_line(script, argv):
    """The command as a user types it: `python scripts/<script> <argv>`."""
    return shlex.join(["python", f"scripts/{script}", *argv])


def make(kind, command, precision, corpus, figures, **scores):
    """A record (a dict) of this run on this machine. `kind`: one of `KINDS`;
    `scores`: "dev" and "test" of a trained model, each a dict."""
    if kind not in KINDS:
        raise ValueError(f"A record's kind is one of {', '.join(KINDS)}; got {kind!r}.")
    return {"kind": kind, "command": command, "version": __version__, "commit": commit(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "machine": machine(), "precision": precision, "corpus": corpus, **scores, "figures": figures}


def write(folder, record):
    """Writes `record` into `folder` as <kind>-<date>.json (a new name, never
    an older record's); returns the path."""
    os.makedirs(folder, exist_ok=True)
    stem = f"{record['kind']}-{record['date'].replace(':', '').replace('-', '')}"
    path, n = os.path.join(folder, f"{stem}.json"), 1
    while os.path.exists(path):
        n += 1
        path = os.path.join(folder, f"{stem}-{n}.json")
    with atomic_open(path) as f:
        f.write(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return path


def read_all(folder):
    """The records in `folder`, oldest first (by date, then file name), each
    with its file name under "file"."""
    found = []
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else ():
        if name.endswith(".json"):
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                record = json.load(f)
            if record.get("kind") not in KINDS:
                raise ValueError(f"{os.path.join(folder, name)} is not a record: its kind is {record.get('kind')!r}.")
            found.append({**record, "file": name})
    return sorted(found, key=lambda record: (record["date"], record["file"]))
