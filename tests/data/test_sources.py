import pytest
import tensorflow_datasets as tfds

from keras_transformer.data import sources
from tests.conftest import write_tsv


def as_list(dataset):
    return [(s.decode(), t.decode()) for s, t in dataset.as_numpy_iterator()]


def test_local_splits_and_explicit_held_out_sets(tmp_path):
    pairs = [(f"s{i}", f"t{i}") for i in range(400)]
    path = write_tsv(tmp_path / "c.tsv", pairs)
    train, stats = sources.load_pairs(path, "train")
    validation, _ = sources.load_pairs(path, "validation")
    test, _ = sources.load_pairs(path, "test")
    assert len(as_list(validation)) == len(as_list(test)) == 10 and stats.read == 380
    assert sorted(as_list(train) + as_list(validation) + as_list(test)) == sorted(pairs)
    explicit = write_tsv(tmp_path / "test.tsv", pairs[:3])
    test, _ = sources.load_pairs(path, "test", test=explicit)
    assert as_list(test) == pairs[:3]


def test_explicit_held_out_pairs_leave_a_tfds_training_split():
    with tfds.testing.mock_data(num_examples=7):
        every, _ = sources.load_pairs("ted_hrlr_translate/pt_to_en", "train")
        every = as_list(every)
    # mock_data gives each split the same examples; set the validation and
    # test splits aside and pass two training pairs explicitly instead.
    with tfds.testing.mock_data(num_examples=7):
        import tempfile

        with tempfile.TemporaryDirectory() as directory:
            held_out = write_tsv(f"{directory}/h.tsv", [(s.strip(), t.strip()) for s, t in every[:2]])
            kept, _ = sources.load_pairs("ted_hrlr_translate/pt_to_en", "train", validation=held_out,
                                         test=held_out)
            assert as_list(kept) == every[2:]


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
    from keras_transformer.data.numerals_en_de import generator as corpus

    test = tfds.load("numerals_en_de", split="test", data_dir=str(tmp_path))
    got = [(ex["en"].decode(), ex["de"].decode()) for ex in test.as_numpy_iterator()]
    assert sorted(got) == sorted(corpus.generate("test"))  # tfds orders examples by key hash


def test_preparing_a_tfds_dataset_leaves_pythons_random_state_alone(tmp_path):
    """tfds draws from Python's global random state while it prepares a
    dataset; Keras seeds initializers from that state. A run that prepares its
    dataset (the first on a machine) must start from the weights every later
    run of the same command starts from."""
    import random

    from keras_transformer.data import sources

    random.seed(7)
    expected = random.getstate()
    sources.load_pairs("numerals_en_de", "validation", data_dir=str(tmp_path))
    assert random.getstate() == expected
    assert (tmp_path / "numerals_en_de").is_dir()  # it did prepare here
