"""The folders are layers: each imports only the layers below it.

Each subpackage is imported in a fresh interpreter, and the package modules
that import pulled in are checked against the layering that the Layout
section of docs/architecture.md describes.
"""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

# What each layer may load, besides the shared root modules (config, run_dir, files).
ALLOWED = {
    "keras_transformer.modeling": {"modeling"},
    "keras_transformer.data": {"modeling", "data"},
    "keras_transformer.decoding": {"modeling", "data", "decoding"},
    "keras_transformer.export": {"modeling", "data", "decoding", "export"},
    "keras_transformer.training": {"modeling", "data", "decoding", "export", "training"},
    "keras_transformer.plots": {"modeling", "data", "decoding", "training", "plots"},
    "keras_transformer.benchmarks": {"modeling", "data", "decoding", "export", "training", "benchmarks"},
}
SHARED = {"config", "run_dir", "files"}


def loaded_layers(module):
    """The package's top-level names (layers and shared modules) in sys.modules after importing `module`
    and all its submodules in a fresh interpreter."""
    code = (
        "import importlib, json, pkgutil, sys\n"
        f"package = importlib.import_module({module!r})\n"
        "for info in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
        "    importlib.import_module(info.name)\n"
        "names = {m.split('.')[1] for m in sys.modules if m.startswith('keras_transformer.')}\n"
        "print(json.dumps(sorted(names)))\n"
    )
    return set(json.loads(last_line_of(code)))


def last_line_of(code):
    """The last line `code` prints, run in a fresh interpreter from the repository's top folder."""
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("module", sorted(ALLOWED))
def test_each_layer_imports_only_the_layers_below_it(module):
    loaded = loaded_layers(module) - SHARED
    assert loaded <= ALLOWED[module], f"{module} loads {sorted(loaded - ALLOWED[module])}"



def test_the_package_never_imports_the_repositorys_lab():
    """benchmarks/ beside the package (eole, oneDNN and streaming harnesses) is not installed: no module of
    keras_transformer may import it, though here, run from the repository, it could."""
    code = (
        "import importlib, pkgutil, sys\n"
        "import keras_transformer\n"
        "for info in pkgutil.walk_packages(keras_transformer.__path__, 'keras_transformer.'):\n"
        "    importlib.import_module(info.name)\n"
        "import benchmarks  # importable from here: the check below can fail\n"
        "print(sorted(m for m in sys.modules if m.startswith('benchmarks.')))\n"
    )
    assert last_line_of(code) == "[]"
