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
  than `POST_NORM_MIN_UPDATES` updates, else the paper's post-norm. Pre-norm
  trains without the long, gentle warm-up that post-norm needs (Xiong et
  al., 2020), and it helped on small corpora (Nguyen and Salazar, 2019),
  who also found it behind post-norm on WMT14 trained to the end. Measured
  here on dev scores (docs/training.md), the same rules otherwise,
  pre-norm climbing twice as steeply (`PRE_NORM_REFERENCE_WARMUP`) against
  post-norm climbing as an 800-update warm-up does: LibreOffice's short
  pairs at 10 minutes 34.38 against 24.21 (about 1,000 updates),
  LibreOffice at 25 minutes 31.14 against 30.02 (2,400), Tatoeba's
  everyday sentences at 17 minutes 27.35 and 26.15 (two runs) against
  26.54 (1,600; on all 459 validation pairs 25.45 and 25.40 against
  25.81, post-norm's one lead, of 0.4).
- dropout: by the epochs the budget buys (`dropout_for`), measured on dev
  scores (docs/training.md). Below `DROPOUT_EPOCHS` passes over the corpus
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
- learning rate and warm-up: the warm-up climbs as the preset's reference
  one does (`REFERENCE_WARMUP`: 800 updates for small, the paper's 4,000 for
  base, with post-norm; `PRE_NORM_REFERENCE_WARMUP`: 400 for small with
  pre-norm), so every update of it has the rate that one has at the same update,
  at most until the cool-down begins (`budget.WARMUP_SHARE`); then the
  paper's inverse square root, and a linear cool-down to zero over the last
  half of the updates (`budget.COOLDOWN_SHARE`, measured on dev scores;
  Hägele et al., 2024, cooled down over the last 20% of long runs), at zero
  exactly when the budget ends (Li et al., 2020: budgeted training). A
  short run is therefore a triangle that peaks lower than the reference.
  The reference climb is the one that trained on real data: on the
  LibreOffice corpus, the small preset with an 800-update warm-up reached
  test sacreBLEU 11.70 at 1,000 updates and 20.57 at 2,000 (hand-set runs
  on a mixed_bfloat16 machine), while the main job's steeper 400-update
  climb stalled there once its rate passed about 2e-3 (a 50-minute run's
  validation BLEU stayed at 1.0-1.3 from update 268 to 402; test 5.06
  after 926 updates), and a warm-up of 47 updates to the main job's peak
  left the loss stuck at 7.0 for 280 updates (Popel and Bojar, 2018, saw
  the same divergence with too short warm-ups). Pre-norm blocks took the
  400-update climb without stalling (above).
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
from keras_transformer.training.budget import FIRST_OVERHEAD_SHARE, climb_scale

# Subword pieces per whitespace word, about, for an 8k-32k SentencePiece model on European languages.
PIECES_PER_WORD = 1.4
# The base preset is chosen only when the budget buys it this many updates.
BASE_MIN_UPDATES = 10_000
# Runs of at least this many updates keep the paper's post-norm blocks: pre-norm
# was measured here at a few hundred updates, and trailed post-norm on WMT14
# trained to the end (Nguyen and Salazar, 2019). The base preset's threshold,
# so that the paper's presets train as the paper's.
POST_NORM_MIN_UPDATES = BASE_MIN_UPDATES
# Dropout's cost per update, measured on the small preset (modeling/presets.py).
DROPOUT_SLOWDOWN = 1.12
# Dropout from this many passes over the corpus (`dropout_for`). Dev BLEU
# (docs/training.md), no dropout against the paper's 0.1: LibreOffice at
# about 6 epochs 22.80 against 18.28, at 10 epochs 30.36 against 29.28; at
# 16-19 epochs (50 minutes, 2,048-token batches) 34.10 against 35.51 (4,096
# with 0.1 scored 35.83); its medium pairs at 19 epochs 37.14 against 36.70
# (a tie); its short pairs at 40 epochs 32.49 against 36.26, and 5,000 of
# its pairs at 34 epochs 19.20 against 20.50; Tatoeba's everyday sentences
# at 19 epochs, on all 459 validation pairs, 24.26 against 25.45 and 25.40
# (two runs). Where LibreOffice and the
# medium pairs disagree, at 16-19 epochs, the safer side is the paper's 0.1:
# the switch sits between there and 10 epochs, where dropout last lost.
DROPOUT_EPOCHS = 15
# 0.3 from this many: not measured here (0.1 beat 0.3 at 40 epochs, 36.26
# against 32.22).
HEAVY_DROPOUT_EPOCHS = 100
# Batches hold config.BATCH_TOKENS tokens a side (the paper's scaled to a CPU), or:
# Half as many when BATCH_TOKENS would buy fewer than SHORT_RUN_UPDATES updates
# of the small preset: early in training the gradient's noise is small next to
# the gradient, so a smaller batch learns about as much per update from half
# the tokens (McCandlish et al., 2018), and a CPU makes about as many tokens
# per second either way. Measured on dev scores (docs/training.md), where
# 4,096 bought 543-1,086 updates: LibreOffice's short pairs at 17 minutes,
# 32.22 against 31.61; LibreOffice at 17 minutes, 16.05 against 12.02 greedy
# at the same 11.3 minutes of training; LibreOffice at 25 minutes, 31.28
# against 30.36-30.50 (three runs of 4,096, 1,056-1,107 updates), and again
# 32.00 (2,424) against 31.17 (4,096: 1,210 made, where its probe said
# 1,517, so the threshold then, 1,500, kept 4,096). The probe's count moved
# by a tenth between two runs of one command, so the threshold sits well
# above the largest count where 2,048 won, and below the smallest where
# 4,096 did not lose: LibreOffice at 50 minutes (dropout 0.1), 4,096 (2,498
# updates) 35.83 against 35.51 (4,278), and two later runs of 4,096 (2,649
# and 2,610) 36.42 and 35.38: a tie. On Tatoeba's everyday sentences at 17
# minutes 4,096 (826 and 849 updates) led by half a point on all 459
# validation pairs, two runs each: 25.95 and 25.89 against 25.45 and 25.40
# (1,558 and 1,607): one shape's half point against two shapes' leads for 2,048.
SHORT_RUN_BATCH_TOKENS = 2048
SHORT_RUN_UPDATES = 2000
SHORT_RUN_PRESETS = ("tiny", "small")
VALIDATION_SENTENCES = 200
# The warm-up a preset's climb follows (see `rate_scale`): the one that
# trained the small preset on real data (see above) for tiny and small, the
# paper's for base and big.
REFERENCE_WARMUP = {"tiny": 800, "small": 800, "base": PAPER_WARMUP_STEPS, "big": PAPER_WARMUP_STEPS}
# With pre-norm blocks: twice as steep for tiny and small (measured on small,
# above); base and big keep the paper's, for want of a measurement. Dev BLEU
# on LibreOffice at 25 minutes (docs/training.md, 507 validation pairs):
# climbing as 400 updates do 33.17, as 800 do 33.04 (a tie), as 200 do 21.99
# (it stalled); two runs each: its short pairs at 10 minutes (238 pairs),
# 400: 34.95 and 35.16, 800: 33.98 and 33.09; Tatoeba's everyday sentences
# at 17 minutes (459 pairs), 400: 25.45 and 25.40, 800: 26.31 and 26.53.
# The two short shapes disagree by about a point each way; 400 is kept, as
# its worst loss (about 1) is smaller than 800's (1.0-2.1), and twice as
# steep stalled.
PRE_NORM_REFERENCE_WARMUP = {"tiny": 400, "small": 400}
# What the recipe and the budget's plan may set (`choose`, `recipe.plan_budget`).
CHOSEN = ("vocab_size", "batch_tokens", "preset", "norm_first", "dropout", "label_smoothing", "max_length",
          "bleu_sentences", "learning_rate_scale", "steps", "checkpoint_every", "warmup_steps", "cooldown")


@dataclasses.dataclass(frozen=True)
class Recipe:
    """What `choose` made of a corpus and a budget: the run's `RunConfig`,
    one line per choice saying why, and the seconds per update the probe
    expects a run of the chosen model to make (`recipe.probe`), trained as
    chosen (dropout's cost counted once). The
    budget's schedule adds its line (`recipe.scheduled`)."""

    config: object
    reasons: tuple
    seconds_per_update: float


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


def epochs(updates, batch_tokens, corpus):
    """Passes over the corpus that `updates` batches of `batch_tokens` target tokens make."""
    target_tokens = corpus.pairs * corpus.mean_words * PIECES_PER_WORD
    return updates * batch_tokens / max(target_tokens, 1.0)


def choose(config, corpus, budget_seconds, probe, fixed=()):
    """The `Recipe` for `config` on `corpus` (a `CorpusSize`) in `budget_seconds`
    on this machine (`probe`). `fixed`: settings the user gave, which stay
    as they are."""
    choices, why = {}, []

    def pick(name, value, reason):
        if name in fixed:
            why.append(f"{name} {getattr(config, name)} (your flag)")
            return getattr(config, name)
        choices[name] = value
        why.append(f"{name} {value}: {reason}")
        return value

    words = corpus.words
    vocab = pick("vocab_size", vocabulary_size(words, corpus.word_types),
                 f"{words / 1e6:.2f}M words in {corpus.pairs:,} pairs, {corpus.word_types:,} distinct words in a "
                 "sample (smaller corpora, smaller vocabularies)")
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
    updates = budget_seconds * (1.0 - FIRST_OVERHEAD_SHARE) / seconds
    if "batch_tokens" not in fixed and preset in SHORT_RUN_PRESETS and updates < SHORT_RUN_UPDATES:
        batch_tokens = pick("batch_tokens", SHORT_RUN_BATCH_TOKENS,
                            f"{BATCH_TOKENS:,}-token batches would buy about {updates:,.0f} updates (fewer than "
                            f"{SHORT_RUN_UPDATES:,}): early in training, smaller batches learn more per token")
        seconds = probe(preset, vocab, batch_tokens, cut)
        updates = budget_seconds * (1.0 - FIRST_OVERHEAD_SHARE) / seconds
    else:
        pick("batch_tokens", BATCH_TOKENS, f"the paper's {PAPER_BATCH_TOKENS:,} per side, scaled to this machine")
    if updates < POST_NORM_MIN_UPDATES and preset in PRE_NORM_REFERENCE_WARMUP:
        pick("norm_first", True, f"the budget buys about {updates:,.0f} updates (fewer than "
             f"{POST_NORM_MIN_UPDATES:,}): pre-norm blocks take a steeper warm-up and learn faster")
    elif updates < POST_NORM_MIN_UPDATES:  # pre-norm was measured on the small preset only
        pick("norm_first", False, f"the budget buys about {updates:,.0f} updates, but the {preset} preset "
             "keeps the paper's post-norm blocks: pre-norm was measured on the small preset only")
    else:
        pick("norm_first", False, f"the budget buys about {updates:,.0f} updates (at least "
             f"{POST_NORM_MIN_UPDATES:,}): the paper's post-norm blocks")
    passes = epochs(updates, batch_tokens, corpus)
    dropout = pick("dropout", dropout_for(passes), f"about {passes:.1f} epochs fit the budget")
    # The probe ran the model with the config's dropout, else its preset's: its cost is counted once.
    probed = presets.resolved_dropout(preset, config.dropout)
    if bool(dropout) != bool(probed):
        seconds *= DROPOUT_SLOWDOWN if dropout else 1.0 / DROPOUT_SLOWDOWN
    pick("label_smoothing", 0.1, "the paper's")
    pick("max_length", max_length_for(corpus.long_words),
         f"99% of pairs have at most {corpus.long_words} words a side")
    pick("bleu_sentences", VALIDATION_SENTENCES, "validation stays a small share of the budget")
    return Recipe(dataclasses.replace(config, **choices), tuple(why), float(seconds))


def reference_warmup(preset, norm_first=False):
    """The warm-up whose climb a run of `preset`, with pre-norm blocks or
    not, follows (`PRE_NORM_REFERENCE_WARMUP`, `REFERENCE_WARMUP`)."""
    if norm_first and preset in PRE_NORM_REFERENCE_WARMUP:
        return PRE_NORM_REFERENCE_WARMUP[preset]
    return REFERENCE_WARMUP.get(preset, PAPER_WARMUP_STEPS)


def rate_scale(preset, warmup, norm_first=False):
    """`learning_rate_scale` under which a warm-up of `warmup` updates climbs
    as the preset's reference one does (`budget.climb_scale`)."""
    return climb_scale(warmup, reference_warmup(preset, norm_first))


def _flops_ratio(big, small, vocab, length):
    """Training FLOPs per token of preset `big` over preset `small`: 6 per weight
    per token, attention's products over `length` tokens included."""
    def flops(name):
        c = presets.get_preset(name)
        weights = c.num_layers * (12 * c.d_model ** 2 + 4 * c.d_model * c.d_ff) + c.d_model * vocab
        attention = c.num_layers * 3 * 2 * length * c.d_model  # self (both sides) and cross, scores and values
        return 6 * weights + 6 * attention

    return flops(big) / flops(small)
