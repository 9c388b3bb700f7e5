"""The recipe for a corpus of one's own trained without a time budget or --steps: until validation BLEU stops.

The main job's settings (a 1,000-piece vocabulary, 800 updates) suit the
built-in corpus only. Given `--dataset` of one's own and neither
`--time-budget` nor `--steps`, the run takes the corpus-based choices of the
budgeted recipe (`auto_config`: vocabulary, model, length cut, batch) and
the paper's training, which a run with no end in sight can afford: post-norm
blocks, dropout 0.1 (the corpus is seen dozens of times) and the inverse
square root to the last update (no cool-down: the end is not known). It
validates on all its validation pairs (a rise that 200 sentences missed
showed on the test: the hidden everyday corpus, 17 against 34 minutes)
once per pass over the corpus (at least every `MIN_INTERVAL`,
at most every `MAX_INTERVAL` updates) and stops when validation BLEU has
not improved for `PATIENCE` intervals, or at the paper's 100,000 updates.
Every choice is printed as a `recipe:` block, and a flag given is kept.
"""

from keras_transformer.config import BATCH_TOKENS, HELD_OUT, RunConfig
from keras_transformer.training import auto_config

# Intervals without a better validation BLEU before training stops (`--early-stopping`); a choice, not measured.
PATIENCE = 3
# Updates between validations: one pass over the corpus, within these bounds
# (a small corpus still trains between validations; a large one, such as
# WMT14 whose pass takes thousands of updates, is still validated often).
# A choice, not measured.
MIN_INTERVAL, MAX_INTERVAL = 100, 2000
# The base preset from this many words (both sides; WMT14 En-De has about
# 200M): smaller corpora overfit it (Sennrich and Zhang, 2019).
BASE_MIN_WORDS = 20_000_000
MAX_UPDATES = 100_000  # the paper's base run
# What `choose` sets, and a resumed run takes as its first start recorded it.
CHOSEN = ("vocab_size", "preset", "batch_tokens", "norm_first", "dropout", "label_smoothing", "max_length",
          "bleu_sentences", "warmup_steps", "cooldown", "checkpoint_every", "early_stopping", "steps")


def applies(config, fixed):
    """Whether `config` is a run on a corpus of one's own with no end given:
    not the built-in corpus, no --time-budget, no --steps, no --init-from."""
    return (config.dataset != RunConfig().dataset and not config.time_budget and "steps" not in fixed
            and not config.init_from)


def interval_for(corpus, batch_tokens):
    """Updates in one pass over `corpus` at `batch_tokens` target tokens, within the bounds."""
    passes = auto_config.epochs(1.0, batch_tokens, corpus)  # passes one update makes
    return int(min(MAX_INTERVAL, max(MIN_INTERVAL, round(1.0 / max(passes, 1e-9)))))


def choose(config, corpus, fixed=()):
    """The `auto_config.Recipe` for `config` on `corpus` (a `CorpusSize`)
    with no end given; `fixed`: the settings the user gave, kept."""
    choices = auto_config.Choices(config, fixed)
    pick = choices.pick
    choices.vocabulary(corpus)
    base = corpus.words >= BASE_MIN_WORDS
    preset = pick("preset", "base" if base else "small",
                  f"{corpus.words / 1e6:.1f}M words ({'at least' if base else 'fewer than'} "
                  f"{BASE_MIN_WORDS / 1e6:.0f}M)")
    choices.depths()
    batch_tokens = pick("batch_tokens", BATCH_TOKENS, "the paper's 25,000 per side, scaled to one machine")
    pick("norm_first", False, "the paper's post-norm blocks, for a run trained until it stops improving")
    pick("dropout", 0.1, "the paper's: a run until validation stops improving sees the corpus dozens of times")
    pick("label_smoothing", 0.1, "the paper's")
    pick("max_length", auto_config.max_length_for(corpus.long_words),
         f"99% of pairs have at most {corpus.long_words} words a side")
    pick("bleu_sentences", HELD_OUT, "all the validation pairs (up to that many): the stopping rule reads them, "
         "and 200 have missed a rise the test showed")
    pick("warmup_steps", auto_config.reference_warmup(preset, False), f"the {preset} preset's reference climb")
    pick("cooldown", 0.0, "the paper's inverse square root to the last update (the end is not known)")
    pick("checkpoint_every", interval_for(corpus, batch_tokens), "a validation after each pass over the corpus")
    pick("early_stopping", PATIENCE, f"training stops after {PATIENCE} validations without a better BLEU")
    pick("steps", MAX_UPDATES, "at most the paper's base run")
    return choices.recipe(None)
