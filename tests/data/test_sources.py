import pytest
import tensorflow_datasets as tfds

from keras_transformer.data import sources
from tests.conftest import write_tsv


def as_list(dataset):
    return [(s.decode(), t.decode()) for s, t in dataset.as_numpy_iterator()]


def test_tsv_skips_and_counts_malformed_lines(tmp_path):
    path = tmp_path / "corpus.tsv"
    path.write_bytes(
        b"one\teins\n"
        b"no tab here\n"
        b"\tleer\n"
        b"bad \xff\xfe bytes\tkaputt\n"
        b"two\tzwei\n"
        b"a\tb\tc\n"
    )
    stats = sources.ReadStats()
    assert sources.read_tsv(str(path), stats) == [("one", "eins"), ("two", "zwei")]
    assert stats.read == 2
    assert dict(stats.skipped) == {"no TAB": 1, "empty side": 1, "undecodable": 1, "more than one TAB": 1}


def test_two_line_aligned_files(tmp_path):
    (tmp_path / "a.en").write_text("one\ntwo\n\nthree\n", encoding="utf-8")
    (tmp_path / "a.de").write_text("eins\nzwei\nleer\ndrei\n", encoding="utf-8")
    pairs, stats = sources.load_pairs(f"{tmp_path}/a.en,{tmp_path}/a.de", "train", held_out=0)
    assert as_list(pairs) == [("one", "eins"), ("two", "zwei"), ("three", "drei")]
    assert stats.skipped == {"empty side": 1}


def test_mismatched_line_counts_are_an_error(tmp_path):
    (tmp_path / "a.en").write_text("one\ntwo\n")
    (tmp_path / "a.de").write_text("eins\n")
    with pytest.raises(ValueError, match="2 lines but .* has 1"):
        sources.load_pairs(f"{tmp_path}/a.en,{tmp_path}/a.de", "train")


def test_local_corpus_holds_out_its_tail_for_validation(tmp_path):
    pairs = [(f"s{i}", f"t{i}") for i in range(100)]
    path = write_tsv(tmp_path / "c.tsv", pairs)
    train, _ = sources.load_pairs(path, "train", held_out=1000)
    validation, _ = sources.load_pairs(path, "validation", held_out=1000)
    assert as_list(train) == pairs[:95] and as_list(validation) == pairs[95:]


def test_missing_file_and_unknown_tfds_name_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.tsv"):
        sources.load_pairs(str(tmp_path / "nope.tsv"), "train")
    with pytest.raises(ValueError, match="Unknown dataset 'no_such_dataset_xyz'"):
        sources.load_pairs("no_such_dataset_xyz", "train")


def test_tfds_translation_dataset_under_mock_data():
    with tfds.testing.mock_data(num_examples=7):
        pairs, _ = sources.load_pairs("ted_hrlr_translate/pt_to_en", "train")
        mock = tfds.load("ted_hrlr_translate/pt_to_en", split="train")
        expected = [(ex["pt"].decode(), ex["en"].decode()) for ex in mock.as_numpy_iterator()]
        assert as_list(pairs) == expected and len(expected) == 7
        reversed_pairs, _ = sources.load_pairs("ted_hrlr_translate/pt_to_en", "train", "en", "pt")
        assert as_list(reversed_pairs) == [(t, s) for s, t in expected]
        with pytest.raises(ValueError, match="--source-lang 'fr' is not in 'wmt14_translate/de-en'; expected one of \\['de', 'en'\\]"):
            sources.load_pairs("wmt14_translate/de-en", "train", "fr", "de")


def test_builtin_corpus_loads_through_tfds(tmp_path):
    from keras_transformer.data import corpus

    test = tfds.load("numerals_en_de", split="test", data_dir=str(tmp_path))
    got = [(ex["en"].decode(), ex["de"].decode()) for ex in test.as_numpy_iterator()]
    assert sorted(got) == sorted(corpus.generate("test"))  # tfds orders examples by key hash
