"""The recipe's rules: what a corpus' size and a budget choose, and that a user's flag wins."""

import pytest

from keras_transformer.config import RunConfig
from keras_transformer.data.corpus_size import CorpusSize, from_pairs
from keras_transformer.training import auto_config


def test_corpus_size_is_measured_on_its_sample():
    sample = [("a b c", "x y"), ("a b c d e", "x y z"), ("a", "b c d e f g")]
    size = from_pairs(1000, sample)
    assert size.mean_words == pytest.approx((3 + 2 + 5 + 3 + 1 + 6) / 6)
    assert size.long_words == 6  # the 99th percentile of the longer sides (3, 5, 6)
    assert size.word_types == len(set("a b c x y d e z f g".split()))
    # Longer sides 3, 5 and 6 words: a batch of fixed tokens is mostly of the long pairs' length.
    assert size.batch_words == pytest.approx((9 + 25 + 36) / (3 + 5 + 6))
    assert size.words == int(1000 * 2 * size.mean_words)
    with pytest.raises(ValueError, match="No training pairs"):
        from_pairs(0, [])


@pytest.mark.parametrize("words,vocab", [(50_000, 4000), (199_999, 4000), (200_000, 8000), (760_000, 8000),
                                         (5_000_000, 16000), (100_000_000, 32000)])
def test_the_vocabulary_grows_with_the_corpus(words, vocab):
    assert auto_config.vocabulary_size(words) == vocab
    assert auto_config.vocabulary_size(words, word_types=100_000) == vocab


def test_a_repetitive_corpus_caps_the_vocabulary_at_half_its_words():
    assert auto_config.vocabulary_size(30_000, word_types=1617) == 800
    assert auto_config.vocabulary_size(30_000, word_types=100) == 300


@pytest.mark.parametrize("epochs,dropout", [(1.0, 0.0), (6.0, 0.0), (10.0, 0.0), (19.0, 0.1), (40.0, 0.1),
                                            (500.0, 0.3)])
def test_dropout_grows_with_the_epochs_the_budget_buys(epochs, dropout):
    """No dropout where it was measured to lose on dev scores (LibreOffice at
    6 and 10 epochs), the paper's 0.1 where it won (LibreOffice at 16-19, its
    short pairs at 40), fairseq's IWSLT 0.3 for hundreds of epochs."""
    assert auto_config.dropout_for(epochs) == dropout
    assert [auto_config.dropout_for(e) for e in range(1, 600)] == sorted(auto_config.dropout_for(e)
                                                                        for e in range(1, 600))


@pytest.mark.parametrize("long_words,length", [(10, 64), (45, 64), (46, 80), (73, 112), (400, 256)])
def test_the_length_cut_keeps_the_long_pairs(long_words, length):
    assert auto_config.max_length_for(long_words) == length


def fake_probe(seconds_by_preset):
    calls, cuts = [], []

    def probe(preset, vocab_size, batch_tokens, max_length):
        calls.append((preset, vocab_size, batch_tokens))
        cuts.append(max_length)
        return seconds_by_preset.get((preset, batch_tokens), seconds_by_preset.get(preset))

    probe.cuts = cuts
    return probe, calls


LIBREOFFICE_LIKE = CorpusSize(pairs=20_000, mean_words=19.0, long_words=73, word_types=18_000, batch_words=31.0)


def test_a_small_corpus_on_a_cpu_budget_gets_the_small_preset_and_says_why():
    probe, calls = fake_probe({"small": 1.2, ("small", 2048): 0.66})
    recipe = auto_config.choose(RunConfig(dataset="c.tsv"), LIBREOFFICE_LIKE, 50 * 60.0, probe)
    config, why, seconds = recipe.config, recipe.reasons, recipe.seconds_per_update
    assert (config.vocab_size, config.preset, config.batch_tokens, config.max_length) == (8000, "small", 4096, 112)
    assert config.label_smoothing == 0.1 and config.bleu_sentences == 200
    real = 1.2  # the probe's time on the corpus' own batches
    epochs = auto_config.epochs(auto_config.estimated_updates(50 * 60.0, real), 4096, LIBREOFFICE_LIKE)
    assert config.dropout == auto_config.dropout_for(epochs) == 0.1  # about 17 epochs
    assert seconds == real
    assert calls == [("small", 8000, 4096)]  # the base preset was priced, not built; 4,096 buys 2,200 updates
    assert probe.cuts == [config.max_length]  # its batches are cut where the run's will be
    assert any(line.startswith("preset small: the budget buys the base preset about") for line in why)
    assert any(line.startswith("vocab_size 8000: 0.76M words in 20,000 pairs, 18,000 distinct") for line in why)
    assert config.norm_first is True  # a few hundred updates
    assert any(line.startswith("norm_first True: the budget buys about 2,200 updates (fewer than 10,000): pre-norm")
               for line in why)
    assert "batch_tokens 4096: the paper's 25,000 per side, scaled to this machine" in why


def test_a_budget_of_few_updates_halves_the_batch_and_times_it_again():
    probe, calls = fake_probe({"small": 2.4, ("small", 2048): 1.3})
    recipe = auto_config.choose(RunConfig(dataset="c.tsv"), LIBREOFFICE_LIKE, 25 * 60.0, probe)
    config, why, seconds = recipe.config, recipe.reasons, recipe.seconds_per_update
    assert config.batch_tokens == auto_config.SHORT_RUN_BATCH_TOKENS == 2048
    assert calls == [("small", 8000, 4096), ("small", 8000, 2048)]
    assert seconds == pytest.approx(1.3)  # 4.4 epochs at 2,048 tokens: no dropout
    assert ("batch_tokens 2048: 4,096-token batches would buy about 550 updates (fewer than 2,000): early in "
            "training, smaller batches learn more per token") in why
    assert any(line.startswith("norm_first True: the budget buys about 1,015 updates") for line in why)
    recipe = auto_config.choose(RunConfig(dataset="c.tsv", batch_tokens=4096), LIBREOFFICE_LIKE, 25 * 60.0,
                                probe, fixed={"batch_tokens"})
    kept, why = recipe.config, recipe.reasons
    assert kept.batch_tokens == 4096 and "batch_tokens 4096 (your flag)" in why
    base = auto_config.choose(RunConfig(dataset="c.tsv", preset="base"), LIBREOFFICE_LIKE, 25 * 60.0,
                              fake_probe({"base": 10.0})[0], fixed={"preset"}).config
    assert base.batch_tokens == 4096  # measured on the small preset only


def probe_buying(updates, budget=3600.0):
    """Seconds per update at which `budget` buys about `updates` (as `choose` estimates them)."""
    return auto_config.estimated_updates(budget, 1.0) / updates


@pytest.mark.parametrize("updates,batch_tokens", [(1_100, 2048), (2_500, 4096)])
def test_the_batch_is_halved_for_short_runs_only(updates, batch_tokens):
    """4,096-token batches become 2,048 where they would buy as few updates
    as LibreOffice at 25 minutes (about 1,100: 2,048 won on dev), and stay
    where they buy as many as at 50 minutes (about 2,500: 4,096 did not lose)."""
    real = probe_buying(updates)
    probe, _ = fake_probe({"small": real, ("small", 2048): real / 2, "base": 1e9})
    config = auto_config.choose(RunConfig(dataset="c.tsv"), LIBREOFFICE_LIKE, 3600.0, probe).config
    assert config.batch_tokens == batch_tokens


@pytest.mark.parametrize("updates,norm_first", [(300, True), (2_400, True), (100_000, False)])
def test_pre_norm_blocks_for_short_runs_the_papers_for_long_ones(updates, norm_first):
    """The budget's updates, not the corpus' content, choose the blocks:
    pre-norm where it was measured to win (a few hundred to a few thousand
    updates), the paper's post-norm for a run as long as the paper's."""
    probe, _ = fake_probe({"small": probe_buying(updates), "base": 1e9})
    recipe = auto_config.choose(RunConfig(dataset="c.tsv"), LIBREOFFICE_LIKE, 3600.0, probe,
                                fixed={"preset", "dropout"})
    config, why = recipe.config, recipe.reasons
    assert config.norm_first is norm_first
    assert f"norm_first {norm_first}: the budget buys about {updates:,} updates" in "\n".join(why)


def test_a_long_budget_on_a_fast_machine_gets_the_base_preset():
    probe, calls = fake_probe({"small": 0.02, "base": 0.1})
    recipe = auto_config.choose(RunConfig(dataset="c.tsv"), LIBREOFFICE_LIKE, 10 * 3600.0, probe)
    config, seconds = recipe.config, recipe.seconds_per_update
    assert config.preset == "base" and calls[-1][0] == "base"
    assert config.dropout == 0.3  # a 20k-pair corpus seen for hundreds of epochs
    assert config.norm_first is False  # the paper's blocks for a run of hundreds of thousands of updates
    # The base preset was probed with its own dropout (0.1): the chosen 0.3 costs no more again.
    assert seconds == pytest.approx(0.1)


def test_the_warm_up_follows_the_presets_reference_climb():
    """Small models climb as the warm-up that trained them, more steeply with
    pre-norm blocks, never more gently than the paper's; the paper's presets
    keep the paper's 4,000 updates, blocks or not (unmeasured here)."""
    from keras_transformer.config import PAPER_WARMUP_STEPS

    for preset in ("tiny", "small"):
        assert auto_config.reference_warmup(preset, True) < auto_config.reference_warmup(preset, False)
        assert auto_config.reference_warmup(preset, False) <= PAPER_WARMUP_STEPS
        assert auto_config.reference_warmup(preset, None) == auto_config.reference_warmup(preset, False)
    for preset in ("base", "big"):
        assert auto_config.reference_warmup(preset, True) == auto_config.reference_warmup(preset, False) == \
            PAPER_WARMUP_STEPS


def test_the_users_flags_stay_as_given():
    probe, calls = fake_probe({"small": 2.0, "tiny": 0.1})
    given = RunConfig(dataset="c.tsv", vocab_size=3000, preset="tiny", dropout=0.0, norm_first=False)
    recipe = auto_config.choose(given, LIBREOFFICE_LIKE, 25 * 60.0, probe,
                                fixed={"vocab_size", "preset", "dropout", "norm_first"})
    config, why = recipe.config, recipe.reasons
    assert (config.vocab_size, config.preset, config.dropout, config.norm_first) == (3000, "tiny", 0.0, False)
    assert "vocab_size 3000 (your flag)" in why and "preset tiny (your flag)" in why
    assert "norm_first False (your flag)" in why
    assert calls == [("tiny", 3000, 4096)]  # the given preset is the only one timed


def test_the_users_depths_stay_as_given_and_are_said():
    probe, _ = fake_probe({"small": 2.0, "base": 8.0})
    given = RunConfig(dataset="c.tsv", encoder_layers=5, decoder_layers=1)
    recipe = auto_config.choose(given, LIBREOFFICE_LIKE, 25 * 60.0, probe, fixed={"encoder_layers", "decoder_layers"})
    assert (recipe.config.encoder_layers, recipe.config.decoder_layers) == (5, 1)
    preset_line = [i for i, line in enumerate(recipe.reasons) if line.startswith("preset ")][0]
    assert recipe.reasons[preset_line + 1:preset_line + 3] == ("encoder_layers 5 (your flag)",
                                                               "decoder_layers 1 (your flag)")
    unset = auto_config.choose(RunConfig(dataset="c.tsv"), LIBREOFFICE_LIKE, 25 * 60.0, probe)
    assert (unset.config.encoder_layers, unset.config.decoder_layers) == (None, None)
    assert not [line for line in unset.reasons if "layers" in line]


def test_the_base_preset_keeps_post_norm_blocks_on_a_short_budget():
    """Pre-norm was measured on the small preset only: a short run of the
    base preset (the user's) is not given an unmeasured pairing."""
    probe, _ = fake_probe({"base": 4.0})
    recipe = auto_config.choose(RunConfig(dataset="c.tsv", preset="base"), LIBREOFFICE_LIKE, 3600.0, probe,
                                fixed={"preset"})
    config, why = recipe.config, recipe.reasons
    assert config.norm_first is False
    assert any(line.startswith("norm_first False: the budget buys about 792 updates, but the base preset keeps "
                               "the paper's post-norm blocks") for line in why)
