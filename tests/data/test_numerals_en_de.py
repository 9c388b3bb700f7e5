import pytest

from keras_transformer.data.numerals_en_de import generator as corpus


@pytest.mark.parametrize("n,english,german", [
    (0, "zero", "null"), (1, "one", "eins"), (17, "seventeen", "siebzehn"),
    (21, "twenty-one", "einundzwanzig"), (30, "thirty", "dreißig"),
    (101, "one hundred one", "einhunderteins"),
    (321, "three hundred twenty-one", "dreihunderteinundzwanzig"),
    (1000, "one thousand", "eintausend"),
    (21001, "twenty-one thousand one", "einundzwanzigtausendeins"),
    (999999, "nine hundred ninety-nine thousand nine hundred ninety-nine",
     "neunhundertneunundneunzigtausendneunhundertneunundneunzig"),
])
def test_numbers(n, english, german):
    assert corpus.english_number(n) == english
    assert corpus.german_number(n) == german


def test_years_ordinals_and_attributive_one():
    assert corpus.english_year(1905) == "nineteen oh five"
    assert corpus.german_year(1905) == "neunzehnhundertfünf"
    assert corpus.german_year(2024) == "zweitausendvierundzwanzig"
    assert [corpus.english_ordinal(n) for n in (1, 2, 3, 12, 20, 21, 31)] == [
        "first", "second", "third", "twelfth", "twentieth", "twenty-first", "thirty-first"]
    assert [corpus.german_ordinal_stem(n) for n in (1, 3, 7, 8, 19, 20, 21)] == [
        "erst", "dritt", "siebt", "acht", "neunzehnt", "zwanzigst", "einundzwanzigst"]
    assert corpus.german_number(1, standalone=False) == "ein"


def test_splits_have_the_promised_sizes_are_identical_across_runs_and_disjoint():
    splits = {name: corpus.generate(name) for name in corpus.SPLIT_SIZES}
    assert {k: len(v) for k, v in splits.items()} == {"train": 50000, "validation": 1000, "test": 1000}
    assert corpus.generate("test") == splits["test"]  # deterministic
    english = {name: {e for e, _ in pairs} for name, pairs in splits.items()}
    assert len(english["train"]) == 50000  # unique within a split
    assert not english["train"] & english["test"]
    assert not english["train"] & english["validation"]
    assert not english["validation"] & english["test"]


def test_word_order_and_compounding_are_not_word_for_word():
    pairs = dict(corpus.generate("train", size=5000))
    # Some German sentences put the participle last and the adverbial second.
    perfect = [g for g in pairs.values() if g.endswith("gekauft.")]
    assert perfect and all(len(g.split()) >= 4 for g in perfect)
    # "half past N" is "halb N+1".
    clocks = [(e, g) for e, g in pairs.items() if e.startswith("It is half past seven")]
    assert all(g == "Es ist halb acht." for _, g in clocks)


def test_unknown_split_is_a_clear_error():
    with pytest.raises(ValueError, match="Unknown split 'dev'.*'test', 'train', 'validation'"):
        corpus.generate("dev")
