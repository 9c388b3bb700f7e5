import collections

import pytest

from keras_transformer.config import RunConfig
from keras_transformer.data import local_corpus, sources
from keras_transformer.data.local_corpus import LocalCorpus, pair_hash, reservoir_sample
from tests.conftest import write_tsv


def domains(n_per_domain=500):
    """A corpus concatenated from two domains: all "alpha" pairs, then all "beta" pairs."""
    return ([(f"alpha {i}", f"Alpha {i}") for i in range(n_per_domain)]
            + [(f"beta {i}", f"Beta {i}") for i in range(n_per_domain)])


def as_list(dataset):
    return [(s.decode(), t.decode()) for s, t in dataset.as_numpy_iterator()]


def test_validation_and_test_are_disjoint_samples_of_the_whole_file(tmp_path):
    pairs = domains(2000)  # 4,000 pairs: 2.5% is 100 per set
    corpus = LocalCorpus(write_tsv(tmp_path / "c.tsv", pairs))
    validation, test = corpus.split("validation"), corpus.split("test")
    assert len(validation) == len(test) == 100
    assert not set(validation) & set(test)
    train = list(corpus.iter_train())
    assert sorted(train + validation + test) == sorted(pairs)  # nothing lost, nothing twice
    for held_out in (validation, test):  # drawn from both ends of the file, not its tail
        counts = collections.Counter(source.split()[0] for source, _ in held_out)
        assert 30 <= counts["alpha"] <= 70 and 30 <= counts["beta"] <= 70
    # The drawn pairs are those of smallest keyed hash: the same on every run.
    by_hash = sorted(set(pairs), key=lambda pair: pair_hash(*pair))
    assert validation == by_hash[:100] and test == by_hash[100:200]
    assert corpus.stats.read == len(train) == 3800


def test_the_default_size_is_1000_pairs_each(tmp_path):
    pairs = [(f"s {i}", f"t {i}") for i in range(50_000)]
    corpus = LocalCorpus(write_tsv(tmp_path / "c.tsv", pairs))
    assert len(corpus.split("validation")) == len(corpus.split("test")) == 1000


def test_explicit_held_out_sets_replace_drawn_ones_and_their_copies_leave_training(tmp_path):
    pairs = domains(200)
    test_pairs = [("beta 7", "Beta 7"), ("unseen", "Ungesehen")]
    # "beta 7" occurs three times in the corpus: all three copies must leave training.
    path = write_tsv(tmp_path / "c.tsv", pairs + [("beta 7", "Beta 7")] * 2)
    corpus = LocalCorpus(path, test=write_tsv(tmp_path / "test.tsv", test_pairs),
                         validation=write_tsv(tmp_path / "valid.tsv", [("alpha 1", "Alpha 1")]))
    assert corpus.split("test") == test_pairs
    assert corpus.split("validation") == [("alpha 1", "Alpha 1")]
    train = list(corpus.iter_train())
    assert sorted(train) == sorted(p for p in pairs if p not in (("beta 7", "Beta 7"), ("alpha 1", "Alpha 1")))
    assert corpus.stats.held_out_duplicates == 4  # three copies of one test pair, one of the validation pair


def test_copies_of_a_drawn_pair_are_removed_and_counted(tmp_path):
    pairs = [(f"s {i}", f"t {i}") for i in range(400)]  # 2.5%: 10 pairs per set
    drawn = min(pairs, key=lambda pair: pair_hash(*pair))  # the first validation pair
    path = write_tsv(tmp_path / "c.tsv", [drawn] + pairs + [drawn, drawn])
    corpus = LocalCorpus(path)
    assert corpus.split("validation")[0] == drawn
    assert drawn not in list(corpus.iter_train())
    assert corpus.stats.held_out_duplicates == 3  # four occurrences, one held out
    assert corpus.stats.read == 400 - 20


def test_only_one_explicit_set_draws_the_other_without_its_pairs(tmp_path):
    pairs = [(f"s {i}", f"t {i}") for i in range(400)]
    test_pairs = pairs[:50]
    corpus = LocalCorpus(write_tsv(tmp_path / "c.tsv", pairs), test=write_tsv(tmp_path / "t.tsv", test_pairs))
    assert len(corpus.split("validation")) == 10
    assert not set(corpus.split("validation")) & set(test_pairs)
    assert sorted(list(corpus.iter_train()) + corpus.split("validation")) == sorted(pairs[50:])


def test_training_stream_mixes_all_parts_of_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(local_corpus, "STRIDE", 10)
    pairs = domains(500)
    corpus = LocalCorpus(write_tsv(tmp_path / "c.tsv", pairs), held_out=0, shards=20)
    stream = as_list(corpus.train_dataset(seed=3))
    assert sorted(stream) == sorted(pairs)  # one pass: every training pair exactly once
    # Every stretch of 20 pairs (one from each shard) holds both domains.
    for start in range(0, 400, 20):
        assert {source.split()[0] for source, _ in stream[start:start + 20]} == {"alpha", "beta"}
    assert as_list(corpus.train_dataset(seed=3)) == stream  # seeded
    assert as_list(corpus.train_dataset(seed=4)) != stream


def test_two_line_aligned_files_stream_from_offsets(tmp_path, monkeypatch):
    monkeypatch.setattr(local_corpus, "STRIDE", 3)
    sources_text = [f"one {i}" for i in range(20)] + [""] + ["last"]
    targets_text = [f"eins {i}" for i in range(20)] + ["leer"] + ["letzte"]
    (tmp_path / "a.en").write_text("\n".join(sources_text) + "\n", encoding="utf-8")
    (tmp_path / "a.de").write_text("\n".join(targets_text) + "\n", encoding="utf-8")
    corpus = LocalCorpus(f"{tmp_path}/a.en,{tmp_path}/a.de", held_out=0, shards=4)
    expected = [(s, t) for s, t in zip(sources_text, targets_text) if s]
    assert sorted(as_list(corpus.train_dataset())) == sorted(expected)
    assert corpus.stats.skipped == {"empty side": 1}
    assert list(corpus.iter_train(9, 3)) == expected[9:12]  # a range starts at its kept offset


def test_malformed_lines_are_skipped_and_counted(tmp_path):
    path = tmp_path / "corpus.tsv"
    path.write_bytes(b"one\teins\nno tab here\n\tleer\nbad \xff\xfe bytes\tkaputt\ntwo\tzwei\na\tb\tc\n")
    corpus = LocalCorpus(str(path), held_out=0)
    assert list(corpus.iter_train()) == [("one", "eins"), ("two", "zwei")]
    assert corpus.stats.read == 2
    assert dict(corpus.stats.skipped) == {"no TAB": 1, "empty side": 1, "undecodable": 1, "more than one TAB": 1}


def test_mismatched_line_counts_are_an_error(tmp_path):
    (tmp_path / "a.en").write_text("one\ntwo\n")
    (tmp_path / "a.de").write_text("eins\n")
    with pytest.raises(ValueError, match="different numbers of lines"):
        LocalCorpus(f"{tmp_path}/a.en,{tmp_path}/a.de").stats


def test_reservoir_sample_is_uniform():
    counts = collections.Counter()
    for trial in range(3000):
        counts.update(reservoir_sample(range(100), 10, seed=trial))
    # Each item is kept with probability 0.1: 300 expected, sd ~16.4.
    assert min(counts.values()) > 300 - 5 * 16.4 and max(counts.values()) < 300 + 5 * 16.4
    assert sorted(reservoir_sample(range(5), 10)) == list(range(5))


def test_vocabulary_sample_spans_the_whole_training_split_without_held_out_pairs(tmp_path):
    pairs = domains(1000)
    config = RunConfig(dataset=write_tsv(tmp_path / "c.tsv", pairs))
    sample = sources.sample_training_pairs(config, 200)
    held_out = set(sources.open_corpus(config.dataset).split("validation")) | set(
        sources.open_corpus(config.dataset).split("test"))
    assert len(sample) == 200 and not set(sample) & held_out
    counts = collections.Counter(source.split()[0] for source, _ in sample)
    assert 60 <= counts["alpha"] <= 140  # not the first 200 lines, which are all alpha


def test_a_corpus_is_scanned_once_however_its_arguments_are_passed(tmp_path):
    path = write_tsv(tmp_path / "c.tsv", domains(50))
    assert sources.open_corpus(path) is sources.open_corpus(path, None, None, 1000)
    assert sources.open_corpus(path, held_out=1000) is sources.open_corpus(path)
    assert sources.open_corpus(path, held_out=10) is not sources.open_corpus(path)
