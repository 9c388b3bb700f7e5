"""Terminology files and the term-use rate: what `translate.py --constraints/--glossary/--prefix` read,
and what `evaluate.py` reports of them.

- A constraints file has one line per input sentence: the target phrases
  that its translation must contain, separated by tabs (an empty line: none).
- A glossary is a TSV file of `source term<TAB>target term` lines: every
  sentence that contains a source term, as whole words with the case as
  given, gets its target term as a constraint (`glossary_constraints`).
  Lines starting with "#" and blank lines are skipped.
- A prefix file has one line per input sentence: the words its translation
  must start with (an empty line: none).

The term-use rate (`term_use`) is the share of constraints that appear in
the translations, as whole words with the case as given: the figure a
translator checks a glossary's use by, with or without constrained search.
"""

import re


def _read_lines(path, what):
    try:
        with open(path, encoding="utf-8") as f:
            return [line.rstrip("\n").rstrip("\r") for line in f]
    except FileNotFoundError:
        raise FileNotFoundError(f"The {what} file {path!r} does not exist.") from None


def read_constraints(path, sentences):
    """One list of target phrases per sentence from a constraints file; ValueError
    if its line count is not the number of `sentences`."""
    lines = _read_lines(path, "constraints")
    if len(lines) != len(sentences):
        raise ValueError(f"The constraints file {path!r} has {len(lines)} lines for {len(sentences)} input "
                         "sentences; give one line per sentence (an empty line for none).")
    return [[phrase.strip() for phrase in line.split("\t") if phrase.strip()] for line in lines]


def read_prefixes(path, sentences):
    """One prefix per sentence ("" for none) from a prefix file; ValueError if
    its line count is not the number of `sentences`."""
    lines = _read_lines(path, "prefix")
    if len(lines) != len(sentences):
        raise ValueError(f"The prefix file {path!r} has {len(lines)} lines for {len(sentences)} input "
                         "sentences; give one line per sentence (an empty line for none).")
    return [line.strip() for line in lines]


def read_glossary(path):
    """[(source term, target term)] from a glossary TSV; ValueError naming the
    first line without a tab or with an empty side."""
    glossary = []
    for number, line in enumerate(_read_lines(path, "glossary"), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        if "\t" not in line:
            raise ValueError(f"{path}:{number}: a glossary line is 'source term<TAB>target term'; this one has "
                             f"no tab: {line!r}.")
        source, target = (side.strip() for side in line.split("\t", 1))
        if not source or not target or "\t" in target:
            raise ValueError(f"{path}:{number}: a glossary line needs one source and one target term; got {line!r}.")
        glossary.append((source, target))
    return glossary


def _whole_words(phrase):
    """A regular expression matching `phrase` as whole words, case as given."""
    return re.compile(r"(?<!\w)" + re.escape(phrase) + r"(?!\w)")


def contains_term(text, phrase):
    """Whether `phrase` occurs in `text` as whole words, with its case."""
    return _whole_words(phrase).search(text) is not None


def glossary_constraints(glossary, sentences):
    """One list of target terms per sentence: those whose source term it
    contains (whole words, case as given), each once, in glossary order.
    A source term inside a longer matching one (“Cells” in “Format - Cells”)
    still counts on its own."""
    patterns = [(_whole_words(source), target) for source, target in glossary]
    out = []
    for sentence in sentences:
        terms = []
        for pattern, target in patterns:
            if target not in terms and pattern.search(sentence):
                terms.append(target)
        out.append(terms)
    return out


def term_use(translations, constraints):
    """(used, total): how many of the constraints (one list per translation)
    appear in their translation as whole words."""
    if len(translations) != len(constraints):
        raise ValueError(f"{len(translations)} translations but {len(constraints)} lines of constraints.")
    total = sum(len(phrases) for phrases in constraints)
    used = sum(contains_term(text, phrase) for text, phrases in zip(translations, constraints) for phrase in phrases)
    return used, total
