import pytest

from keras_transformer.decoding import terminology


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_glossary_lines_need_a_tab_and_skip_comments_and_blanks(tmp_path):
    path = write(tmp_path, "g.tsv", "# UI terms\n\nFormat - Cells\tFormat - Zellen\nWriter\tWriter\n")
    assert terminology.read_glossary(path) == [("Format - Cells", "Format - Zellen"), ("Writer", "Writer")]
    bad = write(tmp_path, "bad.tsv", "Cells\tZellen\nSheet Tabelle\n")
    with pytest.raises(ValueError, match=r"bad.tsv:2: .*no tab: 'Sheet Tabelle'"):
        terminology.read_glossary(bad)
    with pytest.raises(ValueError, match=r":1: .*one source and one target"):
        terminology.read_glossary(write(tmp_path, "empty.tsv", "Cells\t \n"))
    with pytest.raises(FileNotFoundError, match="glossary file"):
        terminology.read_glossary(str(tmp_path / "missing.tsv"))


def test_glossary_terms_match_whole_words_with_their_case():
    glossary = [("Cells", "Zellen"), ("Format - Cells", "Format - Zellen"), ("Sheet", "Tabelle")]
    sentences = ["Choose Format - Cells.", "Cellsx and cells are not Cells", "A Sheet, a Sheet.", "Spreadsheet"]
    assert terminology.glossary_constraints(glossary, sentences) == [
        ["Zellen", "Format - Zellen"], ["Zellen"], ["Tabelle"], []]


def test_constraint_and_prefix_files_have_one_line_per_sentence(tmp_path):
    sentences = ["a", "b", "c"]
    path = write(tmp_path, "c.txt", "Zellen\tTabelle\n\n Writer \n")
    assert terminology.read_constraints(path, sentences) == [["Zellen", "Tabelle"], [], ["Writer"]]
    with pytest.raises(ValueError, match=r"c.txt' has 3 lines for 2 input sentences"):
        terminology.read_constraints(path, sentences[:2])
    prefixes = write(tmp_path, "p.txt", "Wählen Sie\n\nKlicken\n")
    assert terminology.read_prefixes(prefixes, sentences) == ["Wählen Sie", "", "Klicken"]
    with pytest.raises(ValueError, match=r"prefix file .* 3 lines for 4"):
        terminology.read_prefixes(prefixes, sentences + ["d"])


def test_term_use_counts_whole_word_occurrences():
    translations = ["Wählen Sie Format - Zellen.", "Die Zellenformatierung", "Tabelle und Zellen"]
    constraints = [["Format - Zellen", "Tabelle"], ["Zellen"], ["Zellen", "Tabelle"]]
    assert terminology.term_use(translations, constraints) == (3, 5)
    with pytest.raises(ValueError, match="3 translations but 2"):
        terminology.term_use(translations, constraints[:2])
