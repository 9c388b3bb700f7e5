"""The recipe that follows the corpus and the time budget (`--time-budget`), as OpenNMT-tf's `--auto_config` does.

`choose(config, corpus, budget_seconds, probe, fixed)` -> `Recipe` picks what the user
did not set, from the corpus' size (`data.corpus_size.CorpusSize`) and from
what the budget buys on this machine (`probe(preset, vocab_size,
batch_tokens, max_length)` -> seconds per update of that model trained on
the corpus' batches), and says why, one line per choice:

- vocabulary: by the corpus' words. Sennrich and Zhang (2019) found small
  corpora translate better with smaller subword vocabularies; here a real
  18k-pair corpus scored 3.4 BLEU with 8,000 pieces against 0.59 with 1,000.
- model: the small preset, unless the budget buys the base preset the
  updates it needs (`BASE_MIN_UPDATES`); on a 2-core CPU an afternoon buys it
  a few hundred.
- norm placement: pre-norm blocks (`norm_first`) when the budget buys fewer
  than `BASE_MIN_UPDATES` updates, else the paper's post-norm. Pre-norm
  trains without the long, gentle warm-up that post-norm needs (Xiong et
  al., 2020), and it helped on small corpora (Nguyen and Salazar, 2019),
  who also found it behind post-norm on WMT14 trained to the end. Measured
  here on dev scores (docs/training.md at 28bd8c9), the same rules otherwise,
  pre-norm climbing twice as steeply (`REFERENCE_WARMUP`) against
  post-norm climbing as an 800-update warm-up does: LibreOffice's short
  pairs at 10 minutes 34.38 against 24.21 (about 1,000 updates),
  LibreOffice at 25 minutes 31.14 against 30.02 (2,400), Tatoeba's
  everyday sentences at 17 minutes 27.35 and 26.15 (two runs) against
  26.54 (1,600; on all 459 validation pairs 25.45 and 25.40 against
  25.81, post-norm's one lead, of 0.4).
- dropout: by the epochs the budget buys (`dropout_for`), measured on dev
  scores (docs/training.md at 28bd8c9). Below `DROPOUT_EPOCHS` passes over the corpus
  no dropout learns faster and overfits nothing the dev set sees; from
  there the paper's 0.1, which beat 0 on LibreOffice seen 16-19 times and
  both 0 and 0.3 on the corpora seen for 30-40 epochs; 0.3 (fairseq's
  transformer_iwslt_de_en setting for IWSLT's 160k pairs) only from
  `HEAVY_DROPOUT_EPOCHS`, a range not measured here.
  For the same reason the recipe adds no other regularisation (word
  dropout, weight decay) at these budgets.
- label smoothing: the paper's 0.1 (Sennrich and Zhang kept it on small data).
- tokens per batch: 4,096 per side, the paper's 25,000 scaled to a CPU;
  2,048 when 4,096 would buy fewer than 2,000 updates (`SHORT_RUN_UPDATES`).
  On a CPU the tokens per second hardly change with the batch, so halving
  it doubles the updates; early in training that is worth more than the
  larger batch's cleaner gradient (McCandlish et al., 2018). Measured on
  dev scores at 17 and 25 minutes: see `SHORT_RUN_BATCH_TOKENS`. (With post-norm
  blocks, at 25 minutes on a float32 machine, 2,048 had lost to 4,096 on
  the test split, 2.16 against 2.86.)
- maximum length: the corpus' long pairs (99th percentile) in pieces.
- learning rate: the warm-up of the preset's reference climb
  (`REFERENCE_WARMUP`: 800 updates for small, the paper's 4,000 for base,
  with post-norm; 400 for small with pre-norm), then the paper's inverse
  square root, and a linear cool-down to zero over the last half of
  training's time (`recipe.scheduled`, `training.budget`). A run too short
  to finish its warm-up before the cool-down peaks lower, a triangle. The
  800-update climb is the one that trained the small preset on LibreOffice
  (test 11.70 at 1,000 updates, 20.57 at 2,000), where the steeper
  400-update climb stalled with post-norm blocks once its rate passed
  about 2e-3 (Popel and Bojar, 2018, saw the same with short warm-ups);
  pre-norm blocks took it without stalling.
- validation: 200 sentences, so that validation and the model choice stay
  a small share of the budget.

Every choice is a flag: a flag the user gave is kept (`fixed`).

References:
    Sennrich and Zhang, "Revisiting Low-Resource Neural Machine Translation:
    A Case Study", ACL 2019. Araabi and Monz, "Optimizing Transformer for
    Low-Resource Neural Machine Translation", COLING 2020. Nguyen and
    Salazar, "Transformers without Tears: Improving the Normalization of
    Self-Attention", IWSLT 2019. Xiong et al., "On Layer Normalization in
    the Transformer Architecture", ICML 2020. Li, Yumer and
    Ramanan, "Budgeted Training", ICLR 2020. McCandlish et al., "An
    Empirical Model of Large-Batch Training", 2018. Hägele et al., "Scaling Laws
    and Compute-Optimal Training Beyond Fixed Training Durations", NeurIPS
    2024. Popel and Bojar, "Training Tips for the Transformer Model", PBML
    2018. Vaswani et al., 2017.
"""

import dataclasses
import math

from keras_transformer.config import BATCH_TOKENS, PAPER_BATCH_TOKENS, PAPER_WARMUP_STEPS
from keras_transformer.modeling import presets
from keras_transformer.training.budget import RESERVE_SHARE

# Subword pieces per whitespace word, about, for an 8k-32k SentencePiece model on European languages.
PIECES_PER_WORD = 1.4
# The base preset, and the paper's post-norm blocks, from this many updates:
# pre-norm was measured here at a few hundred to a few thousand, and trailed
# post-norm on WMT14 trained to the end (Nguyen and Salazar, 2019).
BASE_MIN_UPDATES = 10_000
# Dropout from this many passes over the corpus (`dropout_for`): no dropout
# won on dev BLEU at 6 and 10 epochs, 0.1 at 16-40 (docs/training.md at 28bd8c9).
DROPOUT_EPOCHS = 15
# 0.3 from this many: not measured here (0.1 beat 0.3 at 40 epochs, 36.26
# against 32.22).
HEAVY_DROPOUT_EPOCHS = 100
# Half the batch where BATCH_TOKENS would buy fewer than SHORT_RUN_UPDATES
# updates of the small preset: early in training a smaller batch learns about
# as much per update from half the tokens (McCandlish et al., 2018), and a CPU
# makes as many tokens a second either way. Dev BLEU at 17 and 25 minutes,
# where 4,096 bought 543-1,107 updates, favoured 2,048 on two shapes; at 2,500
# updates and more 4,096 tied or won (docs/training.md at 28bd8c9).
SHORT_RUN_BATCH_TOKENS = 2048
SHORT_RUN_UPDATES = 2000
VALIDATION_SENTENCES = 200
# The warm-up whose climb a preset's run follows, post-norm and pre-norm: for
# small, the 800 updates that trained it on real data (above), and with
# pre-norm twice as steep (dev BLEU 33.17 against 33.04 on LibreOffice at 25
# minutes; 200 stalled); base and big keep the paper's, for want of a measurement.
REFERENCE_WARMUP = {("tiny", False): 800, ("small", False): 800, ("tiny", True): 400, ("small", True): 400}
# What the recipe may set (`choose`, `recipe.scheduled`).
CHOSEN = ("vocab_size", "batch_tokens", "preset", "norm_first", "dropout", "label_smoothing", "max_length",
          "bleu_sentences", "learning_rate_scale", "warmup_steps", "cooldown")


@dataclasses.dataclass(frozen=True)
class Recipe:
    """What `choose` made of a corpus and a budget: the run's `RunConfig`,
    one line per choice saying why, and the seconds per update the probe
    timed for the chosen model and batch (`recipe.probe`), by which
    `budget.check_fits` refuses a budget too small. The schedule adds its
    line (`recipe.scheduled`)."""

    config: object
    reasons: tuple
    seconds_per_update: float


class Choices:
    """A recipe's choices for `config`, made one at a time by `pick`: a
    setting the user gave (in `fixed`) is kept, else the recipe's value is
    taken; `reasons` says why, a line each."""

    def __init__(self, config, fixed=()):
        self.config, self.fixed, self.values, self.reasons = config, set(fixed), {}, []

    def pick(self, name, value, reason):
        """The setting `name`: the user's, else `value` (for `reason`)."""
        if name in self.fixed:
            self.reasons.append(f"{name} {getattr(self.config, name)} (your flag)")
            return getattr(self.config, name)
        self.values[name] = value
        self.reasons.append(f"{name} {value}: {reason}")
        return value

    def vocabulary(self, corpus):
        """The shared vocabulary's size for `corpus` (`vocabulary_size`)."""
        return self.pick("vocab_size", vocabulary_size(corpus.words, corpus.word_types),
                         f"{corpus.words / 1e6:.2f}M words in {corpus.pairs:,} pairs, {corpus.word_types:,} distinct "
                         "words in a sample (smaller corpora, smaller vocabularies)")

    def depths(self):
        """Says the user's --encoder-layers and --decoder-layers, if given
        (the recipe keeps the preset's depths)."""
        for name in ("encoder_layers", "decoder_layers"):
            if name in self.fixed:
                self.pick(name, None, "")

    def recipe(self, seconds_per_update):
        return Recipe(dataclasses.replace(self.config, **self.values), tuple(self.reasons), seconds_per_update)


def vocabulary_size(words, word_types=None):
    """Pieces of the shared vocabulary for a corpus of `words` words (both
    sides), at most half its `word_types` (SentencePiece cannot fill a
    vocabulary much larger than a small, repetitive corpus' words)."""
    size = 32000
    for limit, pieces in ((200_000, 4000), (2_000_000, 8000), (20_000_000, 16000)):
        if words < limit:
            size = pieces
            break
    if word_types is not None:
        size = min(size, max(300, 100 * (word_types // 200)))
    return size


def dropout_for(epochs):
    """Residual dropout for a run that sees its corpus `epochs` times."""
    if epochs < DROPOUT_EPOCHS:
        return 0.0
    return 0.1 if epochs < HEAVY_DROPOUT_EPOCHS else 0.3


def max_length_for(long_words):
    """The training length cut, in pieces, that keeps the corpus' long pairs (a multiple of 16, 64-256)."""
    return int(min(256, max(64, 16 * math.ceil(long_words * PIECES_PER_WORD / 16))))


def estimated_updates(budget_seconds, seconds_per_update):
    """Updates the budget buys at the probe's `seconds_per_update`, less the
    share first set aside for the work after training: an estimate that
    only chooses (`choose`)."""
    return budget_seconds * (1.0 - RESERVE_SHARE) / seconds_per_update


def epochs(updates, batch_tokens, corpus):
    """Passes over the corpus that `updates` batches of `batch_tokens` target tokens make."""
    target_tokens = corpus.pairs * corpus.mean_words * PIECES_PER_WORD
    return updates * batch_tokens / max(target_tokens, 1.0)


def choose(config, corpus, budget_seconds, probe, fixed=()):
    """The `Recipe` for `config` on `corpus` (a `CorpusSize`) in `budget_seconds`
    on this machine (`probe`). `fixed`: settings the user gave, which stay
    as they are."""
    choices = Choices(config, fixed)
    pick = choices.pick
    vocab = choices.vocabulary(corpus)
    batch_tokens = config.batch_tokens if "batch_tokens" in fixed else BATCH_TOKENS
    # The probe trains on the run's own batches, cut where the run will cut them.
    cut = config.max_length if "max_length" in fixed else max_length_for(corpus.long_words)
    length = corpus.batch_words * PIECES_PER_WORD  # a batch's rows, on average over its tokens
    if "preset" in fixed:
        preset = pick("preset", config.preset, "")
        seconds = probe(preset, vocab, batch_tokens, cut)
    else:
        seconds = probe("small", vocab, batch_tokens, cut)
        base_updates = budget_seconds / (seconds * _flops_ratio("base", "small", vocab, length))
        preset = pick("preset", "base" if base_updates >= BASE_MIN_UPDATES else "small",
                      f"the budget buys the base preset about {base_updates:,.0f} updates "
                      f"({'at least' if base_updates >= BASE_MIN_UPDATES else 'fewer than'} {BASE_MIN_UPDATES:,})")
        if preset != "small":
            seconds = probe(preset, vocab, batch_tokens, cut)
    choices.depths()
    updates = estimated_updates(budget_seconds, seconds)
    if "batch_tokens" not in fixed and preset in ("tiny", "small") and updates < SHORT_RUN_UPDATES:
        batch_tokens = pick("batch_tokens", SHORT_RUN_BATCH_TOKENS,
                            f"{BATCH_TOKENS:,}-token batches would buy about {updates:,.0f} updates (fewer than "
                            f"{SHORT_RUN_UPDATES:,}): early in training, smaller batches learn more per token")
        seconds = probe(preset, vocab, batch_tokens, cut)
        updates = estimated_updates(budget_seconds, seconds)
    else:
        pick("batch_tokens", BATCH_TOKENS, f"the paper's {PAPER_BATCH_TOKENS:,} per side, scaled to this machine")
    pick("norm_first", *norm_first_for(preset, updates))
    passes = epochs(updates, batch_tokens, corpus)
    pick("dropout", dropout_for(passes), f"about {passes:.1f} epochs fit the budget")
    pick("label_smoothing", 0.1, "the paper's")
    pick("max_length", max_length_for(corpus.long_words),
         f"99% of pairs have at most {corpus.long_words} words a side")
    pick("bleu_sentences", VALIDATION_SENTENCES, "validation stays a small share of the budget")
    return choices.recipe(float(seconds))


def norm_first_for(preset, updates):
    """(pre-norm blocks or not, why) for a run of `preset` the budget buys about `updates` updates."""
    if updates >= BASE_MIN_UPDATES:
        return False, (f"the budget buys about {updates:,.0f} updates (at least {BASE_MIN_UPDATES:,}): the "
                       "paper's post-norm blocks")
    if (preset, True) not in REFERENCE_WARMUP:  # pre-norm was measured on the small preset only
        return False, (f"the budget buys about {updates:,.0f} updates, but the {preset} preset keeps the paper's "
                       "post-norm blocks: pre-norm was measured on the small preset only")
    return True, (f"the budget buys about {updates:,.0f} updates (fewer than {BASE_MIN_UPDATES:,}): pre-norm "
                  "blocks take a steeper warm-up and learn faster")


def reference_warmup(preset, norm_first=False):
    """The warm-up whose climb a run of `preset`, with pre-norm blocks or
    not, follows (`REFERENCE_WARMUP`; the paper's for base and big)."""
    return REFERENCE_WARMUP.get((preset, bool(norm_first)), PAPER_WARMUP_STEPS)


def _flops_ratio(big, small, vocab, length):
    """Training FLOPs per token of preset `big` over preset `small`: 6 per weight
    per token, attention's products over `length` tokens included."""
    def flops(name):
        c = presets.get_preset(name)
        weights = c.num_layers * (12 * c.d_model ** 2 + 4 * c.d_model * c.d_ff) + c.d_model * vocab
        attention = c.num_layers * 3 * 2 * length * c.d_model  # self (both sides) and cross, scores and values
        return 6 * weights + 6 * attention

    return flops(big) / flops(small)
