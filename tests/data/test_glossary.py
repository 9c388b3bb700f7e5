from keras_transformer import cli
from keras_transformer.data.glossary import extract_glossary, word_runs
from keras_transformer.decoding.terminology import read_glossary
from tests.conftest import run_entry_point, write_tsv


def test_word_runs_are_one_space_apart_and_capitalised_ones_skip_the_first_word():
    sentence = "Choose Format Cells, then Edit - Paste Special."
    assert word_runs(sentence, 2) >= {"Choose Format", "Format Cells", "Paste Special", "Special"}
    assert "Cells then" not in word_runs(sentence, 2)  # a comma between
    assert "Edit Paste" not in word_runs(sentence, 2)  # " - " between
    assert word_runs(sentence, 3, capitalised=True) == {"Format", "Cells", "Format Cells", "Edit", "Paste",
                                                        "Special", "Paste Special"}


def corpus():
    """Pairs in which "Format Cells" is always "Zellen formatieren", "Undo" always "Rückgängig", and
    "Writer" stays "Writer"; other capitalised words are translated inconsistently."""
    contexts = [("Open the {} dialog.", "Öffnen Sie den Dialog {}."), ("Use {} here.", "Verwenden Sie hier {}."),
                ("Then choose {}.", "Wählen Sie dann {}."), ("See {} for more.", "Mehr unter {}.")]
    terms = [("Format Cells", "Zellen formatieren"), ("Undo", "Rückgängig"), ("Writer", "Writer")]
    pairs = []
    for i in range(12):
        source, target = contexts[i % 4]
        for term, translation in terms:
            pairs.append((source.format(term) + f" {i}", target.format(translation) + f" {i}"))
        answers = ["Frag Bob danach.", "Rede mit ihm.", "Sprich ihn an.", "Bitte ihn."]
        pairs.append((f"Ask Bob about it {i}.", answers[i % 4] + f" {i}"))
    return pairs


def test_the_consistent_terms_are_found_and_the_rest_left_out():
    found = {(source, target) for source, target, _, _ in extract_glossary(corpus(), min_count=8)}
    assert ("Format Cells", "Zellen formatieren") in found and ("Undo", "Rückgängig") in found
    assert not any(source in ("Writer", "Bob", "Ask") for source, _ in found)  # identical, or not consistent
    assert ("Writer", "Writer") in {(s, t) for s, t, _, _ in extract_glossary(corpus(), identical=True)}
    # "Format" and "Cells" alone are inside "Format Cells", as consistent: left out.
    assert not any(source in ("Format", "Cells") for source, _ in found)


def test_make_glossary_writes_what_translate_reads(tmp_path, capsys):
    path = write_tsv(tmp_path / "corpus.tsv", corpus())
    output = str(tmp_path / "glossary.tsv")
    code, out, err = run_entry_point(cli.make_glossary_main, ["--corpus", path, "--output", output], capsys)
    assert code == 0, err
    glossary = read_glossary(output)
    assert ("Format Cells", "Zellen formatieren") in glossary
    assert out.strip() == f"{len(glossary)} terms written to {output}"
    code, _, err = run_entry_point(cli.make_glossary_main, ["--corpus", path, "--output", output, "--min-dice", "0"],
                                   capsys)
    assert code == 2 and "--min-dice must be in (0, 1]; got 0.0" in err
