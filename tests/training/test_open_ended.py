"""A corpus of one's own with no --time-budget or --steps: the recipe's choices, trained until validation stops."""

import dataclasses

import pytest

from tests.conftest import run_entry_point, write_tsv


def corpus(words, pairs=10_000, long_words=40):
    from keras_transformer.data.corpus_size import CorpusSize

    mean = words / (2 * pairs)
    return CorpusSize(pairs=pairs, mean_words=mean, long_words=long_words, word_types=50_000, batch_words=mean)


def test_it_applies_to_a_corpus_of_ones_own_with_no_end_given():
    from keras_transformer.config import RunConfig
    from keras_transformer.training import open_ended

    assert not open_ended.applies(RunConfig(), set())  # the main job keeps its 800 updates
    mine = RunConfig(dataset="mine.tsv")
    assert open_ended.applies(mine, {"dataset"})
    assert not open_ended.applies(mine, {"dataset", "steps"})
    assert not open_ended.applies(dataclasses.replace(mine, time_budget="25"), {"dataset", "time_budget"})
    assert not open_ended.applies(dataclasses.replace(mine, init_from="runs/x"), {"dataset", "init_from"})


def test_the_model_follows_the_corpus_and_training_ends_on_validation_not_a_toy_count():
    from keras_transformer.config import RunConfig
    from keras_transformer.training import auto_config, open_ended

    mine = RunConfig(dataset="mine.tsv")
    below = open_ended.choose(mine, corpus(open_ended.BASE_MIN_WORDS - 1)).config
    at = open_ended.choose(mine, corpus(open_ended.BASE_MIN_WORDS)).config
    assert (below.preset, at.preset) == ("small", "base")
    for config in (below, at):
        assert config.vocab_size != mine.vocab_size and config.steps > mine.steps
        assert config.early_stopping >= 1 and config.bleu_sentences > 0  # validation decides the end
        assert config.cooldown == 0.0  # no cool-down towards an end nobody knows
        assert config.warmup_steps == auto_config.reference_warmup(config.preset, config.norm_first)


def test_a_validation_falls_after_each_pass_within_its_bounds():
    from keras_transformer.training import auto_config, open_ended

    tiny, huge, middle = corpus(2_000, pairs=100), corpus(400_000_000, pairs=4_000_000), corpus(2_000_000)
    assert open_ended.interval_for(tiny, 4096) == open_ended.MIN_INTERVAL
    assert open_ended.interval_for(huge, 4096) == open_ended.MAX_INTERVAL
    interval = open_ended.interval_for(middle, 4096)
    assert open_ended.MIN_INTERVAL < interval < open_ended.MAX_INTERVAL
    assert auto_config.epochs(interval, 4096, middle) == pytest.approx(1.0, abs=0.01)


def test_a_flag_given_is_kept_and_said_to_be_yours():
    from keras_transformer.config import RunConfig
    from keras_transformer.training import open_ended

    made = open_ended.choose(RunConfig(dataset="mine.tsv", vocab_size=3000, dropout=0.3), corpus(1_000_000),
                             {"dataset", "vocab_size", "dropout"})
    assert (made.config.vocab_size, made.config.dropout) == (3000, 0.3)
    assert "vocab_size 3000 (your flag)" in made.reasons and "dropout 0.3 (your flag)" in made.reasons


@pytest.mark.slow
def test_train_py_on_a_corpus_of_ones_own_prints_its_recipe_and_stops_on_validation(tmp_path, small_corpus,
                                                                                   capsys):
    """`train.py --dataset mine.tsv` (here with a tiny model and quick validations to stay short): the recipe
    block, a vocabulary from the corpus, validation BLEU as the stopping rule; started again, it resumes with
    the choices its first start recorded."""
    from keras_transformer import cli
    from keras_transformer.run_dir import RunDir
    from keras_transformer.training import open_ended

    train, test = small_corpus
    mine = write_tsv(tmp_path / "mine.tsv", train + test)
    run = str(tmp_path / "run")
    args = ["--dataset", mine, "--preset", "tiny", "--batch-tokens", "1024", "--bleu-sentences", "5",
            "--checkpoint-every", "4", "--early-stopping", "1", "--max-output-extra", "5", "--model-dir", run,
            "--export-dir", ""]
    code, out, err = run_entry_point(cli.train_main, args, capsys)
    assert code == 0, err
    block = [line.strip() for line in out.split("recipe:\n")[1].split("\n")[:len(open_ended.CHOSEN)]]
    assert "preset tiny (your flag)" in block and "early_stopping 1 (your flag)" in block
    config = RunDir(run).load_config()
    assert any(line.startswith(f"vocab_size {config.vocab_size}: ") for line in block)
    assert config.vocab_size != 1000 and config.steps == open_ended.MAX_UPDATES and config.cooldown == 0.0
    scores = RunDir(run).read_validation_state()["scores"]
    # It stopped on validation: the last interval scored no better than the best before it.
    bleu = [scores[k]["val_bleu"] for k in sorted(scores, key=int)]
    assert len(bleu) >= 2 and bleu[-1] <= max(bleu[:-1])
    assert RunDir(run).read_record()["figures"]["updates"] < open_ended.MAX_UPDATES

    code, out, err = run_entry_point(cli.train_main, args, capsys)  # started again: the recorded choices
    assert code == 0, err
    assert "recipe:" not in out
    assert RunDir(run).load_config() == config
