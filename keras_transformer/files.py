"""Files written whole or not at all: a run killed mid-write keeps the previous version.

Every file of a run that is rewritten while the run goes on (its settings,
validation state, model choice, best weights, vocabulary, held-out sets)
is written through one of these two, never in place.
"""

import contextlib
import os


def _tmp_path(path):
    """A sibling of `path` that keeps its suffix (Keras insists on `.weights.h5`)."""
    directory, name = os.path.split(path)
    return os.path.join(directory, f".tmp.{os.getpid()}.{name}")


@contextlib.contextmanager
def atomic_path(path):
    """Yields a temporary path to write; moves it over `path` when the block ends.

    If the block raises, the temporary file is removed and `path` is left as
    it was; if the process dies in it, `path` is left as it was (a stray
    `.tmp.*` sibling may remain). For writers that take a path, such as
    `model.save_weights` or `shutil.copyfile`.
    """
    tmp = _tmp_path(path)
    try:
        yield tmp
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    os.replace(tmp, path)


@contextlib.contextmanager
def atomic_open(path, mode="w"):
    """`open(path, mode)` through `atomic_path`: text ("w", UTF-8) or bytes ("wb")."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes a whole file; mode must be 'w' or 'wb', got {mode!r}.")
    with atomic_path(path) as tmp:
        with open(tmp, mode, encoding=None if "b" in mode else "utf-8") as f:
            yield f
