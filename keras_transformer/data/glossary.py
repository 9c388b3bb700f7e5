"""A glossary drawn from a parallel corpus: the UI terms it translates the same way every time.

`extract_glossary(pairs)` is bilingual term extraction by co-occurrence,
the classic recipe (Smadja et al., 1996; Dice's coefficient as in Kupiec,
1993), kept small enough to read:

1. source terms: runs of 1-`max_words` words that each start with a capital
   letter, not at the start of the sentence (where every word has one), and
   in at least `min_count` pairs: in software documentation these are
   names of menus, dialogs, buttons and products ("Free Indexes",
   "Drawing", "LibreOffice");
2. target terms: every run of 1-`max_words` words of the target side;
3. each source term gets the target term it co-occurs with most
   consistently, by Dice's coefficient 2 c(s, t) / (c(s) + c(t)) over
   pairs (the longest run among equals), kept if that is at least `min_dice`;
4. terms shorter than 3 characters, with digits or (unless asked for)
   kept as they are on the target side are left out;
5. the `size` terms with the highest Dice (then the most frequent, then
   the longest) win; a source term inside a longer one that won with the
   same consistency is dropped.

Words are runs of letters and digits (with inner hyphens and apostrophes)
separated by exactly one space, so a term read back matches whole words
(`decoding.terminology.glossary_constraints`). Nothing in it knows a
language or a corpus: it keeps what the counts say.
"""

import collections
import re

_WORD = re.compile(r"\w+(?:[-'’]\w+)*")


def word_runs(sentence, max_words, capitalised=False):
    """The runs of 1-`max_words` consecutive words of `sentence` (words one
    space apart), as strings, each once; with `capitalised`, only runs whose
    words all start with a capital letter and that do not start the sentence."""
    words = [(m.start(), m.end(), m.group()) for m in _WORD.finditer(sentence)]
    runs = set()
    for i in range(len(words)):
        if capitalised and (i == 0 or not words[i][2][0].isupper()):
            continue
        for j in range(i, min(i + max_words, len(words))):
            if j > i and (words[j][0] != words[j - 1][1] + 1 or sentence[words[j - 1][1]] != " "):
                break  # not one space apart
            if capitalised and not words[j][2][0].isupper():
                break
            runs.add(sentence[words[i][0]:words[j][1]])
    return runs


def extract_glossary(pairs, size=60, max_words=3, min_count=8, min_dice=0.6, identical=False):
    """[(source term, target term, dice, pairs)] for a list of (source,
    target) pairs, best first (see the module docstring). Terms of fewer
    than 3 characters or with digits (cell references, keys such as F9)
    are left out, and so, unless `identical`, are terms the target keeps
    as they are (names of products and functions)."""
    source_runs = [word_runs(source, max_words, capitalised=True) for source, _ in pairs]
    target_runs = [word_runs(target, max_words) for _, target in pairs]
    source_counts = collections.Counter(run for runs in source_runs for run in runs)
    target_counts = collections.Counter(run for runs in target_runs for run in runs)
    where = collections.defaultdict(list)  # source term -> the pairs holding it
    for index, runs in enumerate(source_runs):
        for run in runs:
            if source_counts[run] >= min_count:
                where[run].append(index)
    found = []
    for term, indices in where.items():
        together = collections.Counter(run for i in indices for run in target_runs[i]
                                       if target_counts[run] >= min_count)
        if not together:
            continue
        # The most consistent; among equals, the longest run (the whole term, not a word of it).
        dice, _, target = max((2.0 * count / (len(indices) + target_counts[run]), run.count(" "), run)
                              for run, count in together.items())
        if dice >= min_dice and len(term) >= 3 and not any(c.isdigit() for c in term + target) and (
                identical or term != target):
            found.append((term, target, dice, len(indices)))
    found.sort(key=lambda entry: (-round(entry[2], 2), -entry[3], -entry[0].count(" "), entry[0]))
    kept = []
    for entry in found:
        inside = any(re.search(r"(?<!\w)" + re.escape(entry[0]) + r"(?!\w)", longer[0]) and
                     round(longer[2], 2) >= round(entry[2], 2) for longer in kept)
        if not inside:
            kept.append(entry)
        if len(kept) == size:
            break
    return kept
