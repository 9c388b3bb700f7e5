"""Files written whole or not at all: a run killed mid-write keeps the previous version."""

import contextlib
import os


@contextlib.contextmanager
def atomic_open(path):
    """Opens `path + ".tmp"` for writing (UTF-8) and moves it over `path` when
    the block ends. If the block raises, or the process dies in it, `path` is
    left as it was."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        yield f
    os.replace(tmp, path)
