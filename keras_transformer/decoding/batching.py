"""Length-sorted batches over a Python list, with a progress line.

Translation and scoring both sort their inputs by length (fewer padded
positions per batch), run a batched function, and put the results back in
the input order; this is that loop, once.
"""

import sys
import time

import numpy as np


def in_length_order(function, items, lengths, batch_size=64, progress=None):
    """Calls `function(batch)` on `items` in batches of similar `lengths`.

    function: list of items -> a result per item (any sequence of len(batch)).
    progress: a progress line for stderr, e.g. "Translated {done}/{total}
        sentences" (the rate is appended), or None for none.
    Returns the results as a list, in the order of `items`.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1; got {batch_size}.")
    items = list(items)
    if len(lengths) != len(items):
        raise ValueError(f"{len(items)} items but {len(lengths)} lengths.")
    order = np.argsort(lengths, kind="stable")
    results = [None] * len(items)
    start = time.perf_counter()
    for first in range(0, len(items), batch_size):
        chunk = order[first : first + batch_size]
        for i, result in zip(chunk, function([items[i] for i in chunk])):
            results[i] = result
        if progress:
            done = min(first + batch_size, len(items))
            rate = done / max(time.perf_counter() - start, 1e-9)
            line = progress.format(done=done, total=len(items))
            print(f"\r{line} ({rate:.1f}/s)", end="", file=sys.stderr, flush=True)
    if progress and items:
        print(file=sys.stderr)
    return results
