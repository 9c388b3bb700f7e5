"""Mixing back-translated pairs with real ones (Sennrich et al., 2016; Edunov et al., 2018).

A reverse (target -> source) model translates target-side monolingual text,
by sampling for Edunov et al.'s gains; each synthetic source is paired with
the real sentence it came from. `mix` writes the synthetic pairs and the
real pairs as two line-aligned files, the `--dataset SOURCE,TARGET` of
scripts/train.py:

- synthetic pairs first, real pairs last;
- the validation and test pairs that a run on the real corpus alone draws
  (`local_corpus`; a reverse-direction run draws the same) can be written as
  explicit held-out sets, so the run on the mix is scored on real text only
  and never trains on those pairs;
- optionally each synthetic source starts with a tag (Caswell et al., 2019,
  "Tagged Back-Translation"), so the model can tell them from real sources.
  The tag is plain text; it begins so many training sources that BPE gives
  it pieces of its own. Sources given to the trained model carry no tag.
"""

import os

from keras_transformer.files import atomic_open

DEFAULT_TAG = "<BT>"


def _lines(path):
    """The lines of a file, split at LF only (a CR or other separator inside a line stays in it)."""
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def mix(synthetic_sources, monolingual_targets, real_sources, real_targets, output_source, output_target, tag=None,
        held_out_prefix=None):
    """Writes the mixed corpus; returns a dict of counts.

    synthetic_sources: the reverse model's translations of
        `monolingual_targets`, line by line.
    real_sources, real_targets: the real parallel corpus, line-aligned.
    tag: None, or a string put before every synthetic source (with a space).
    held_out_prefix: if given, the real corpus' drawn validation and test
        pairs go to PREFIX.validation.tsv and PREFIX.test.tsv, for train.py's
        --validation and --test.
    Synthetic pairs with an empty side are left out and counted. Counts:
    "synthetic", "real", "skipped_empty", and "validation" and "test" with
    a prefix.
    """
    counts = {"synthetic": 0, "real": 0, "skipped_empty": 0}
    pairs = []
    for name, (sources, targets) in (("synthetic", (synthetic_sources, monolingual_targets)),
                                     ("real", (real_sources, real_targets))):
        source_lines, target_lines = _lines(sources), _lines(targets)
        if len(source_lines) != len(target_lines):
            raise ValueError(f"{sources!r} has {len(source_lines)} lines but {targets!r} has {len(target_lines)}; "
                             "they must be line-aligned.")
        for source, target in zip(source_lines, target_lines):
            if name == "synthetic":
                if not source.strip() or not target.strip():
                    counts["skipped_empty"] += 1
                    continue
                source = f"{tag} {source}" if tag else source
            pairs.append((source, target))
            counts[name] += 1
    for path, side in ((output_source, 0), (output_target, 1)):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with atomic_open(path) as f:
            f.writelines(pair[side] + "\n" for pair in pairs)
    if held_out_prefix:
        from keras_transformer.data.local_corpus import LocalCorpus  # noqa: PLC0415  (loads TensorFlow)

        real = LocalCorpus(f"{real_sources},{real_targets}")
        for split in ("validation", "test"):
            held_out = real.split(split)
            path = f"{held_out_prefix}.{split}.tsv"
            with atomic_open(path) as f:
                f.writelines(f"{source}\t{target}\n" for source, target in held_out)
            counts[split] = len(held_out)
    return counts
