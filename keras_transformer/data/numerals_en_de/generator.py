"""The built-in English->German corpus, generated deterministically by code.

No download and no third-party text: every pair is produced from the rules
below. The corpus is built so that a word-for-word map cannot translate it:

- numbers compound into one word and swap units and tens:
  "three hundred twenty-one" -> "dreihunderteinundzwanzig";
- years insert "hundert": "nineteen oh five" -> "neunzehnhundertfünf";
- ordinals inflect by case: "the third of May" -> "der dritte Mai",
  "on the third of May" -> "am dritten Mai";
- clock times shift the hour: "half past seven" -> "halb acht";
- main clauses put the verb second and the participle last:
  "Yesterday, my brother bought two bottles of apple juice."
  -> "Gestern hat mein Bruder zwei Flaschen Apfelsaft gekauft.";
- subordinate clauses put the finite verb last;
- "one" agrees with gender and case: "ein Apfel", "einen Apfel", "eine Flasche".

Splits are disjoint by construction: a pair's split is decided by a hash of
its English side, so the same sentence can never land in two splits.
"""

import hashlib
import random

SPLIT_SIZES = {"train": 50000, "validation": 1000, "test": 1000}
SEED = 20170612  # the arXiv date of the paper

# ---------------------------------------------------------------- numbers
_EN_ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
            "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
            "eighteen", "nineteen"]
_EN_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_DE_ONES = ["null", "eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun", "zehn",
            "elf", "zwölf", "dreizehn", "vierzehn", "fünfzehn", "sechzehn", "siebzehn", "achtzehn",
            "neunzehn"]
_DE_TENS = ["", "", "zwanzig", "dreißig", "vierzig", "fünfzig", "sechzig", "siebzig", "achtzig",
            "neunzig"]


def english_number(n):
    """Cardinal in American English words, 0 <= n < 1,000,000: "three hundred twenty-one"."""
    if not 0 <= n < 1_000_000:
        raise ValueError(f"n must be in [0, 1000000); got {n}.")
    if n < 20:
        return _EN_ONES[n]
    if n < 100:
        return _EN_TENS[n // 10] + ("" if n % 10 == 0 else "-" + _EN_ONES[n % 10])
    if n < 1000:
        rest = n % 100
        return _EN_ONES[n // 100] + " hundred" + ("" if rest == 0 else " " + english_number(rest))
    rest = n % 1000
    return english_number(n // 1000) + " thousand" + ("" if rest == 0 else " " + english_number(rest))


def german_number(n, standalone=True):
    """Cardinal as one German word: 321 -> "dreihunderteinundzwanzig".

    `standalone=False` gives the attributive form used before a noun or a
    unit, where a final "eins" becomes "ein" (e.g. "ein Uhr").
    """
    if not 0 <= n < 1_000_000:
        raise ValueError(f"n must be in [0, 1000000); got {n}.")
    if n < 100:
        if n == 1:
            return "eins" if standalone else "ein"
        if n < 20:
            return _DE_ONES[n]
        ones = n % 10
        return _DE_TENS[n // 10] if ones == 0 else ("ein" if ones == 1 else _DE_ONES[ones]) + "und" + _DE_TENS[n // 10]
    if n < 1000:
        rest = n % 100
        head = ("ein" if n // 100 == 1 else _DE_ONES[n // 100]) + "hundert"
        return head + ("" if rest == 0 else german_number(rest, standalone))
    rest = n % 1000
    thousands = n // 1000
    head = ("ein" if thousands == 1 else german_number(thousands, standalone=False)) + "tausend"
    return head + ("" if rest == 0 else german_number(rest, standalone))


def english_year(year):
    """1900..2099 as spoken: "nineteen oh five", "nineteen ninety-nine", "two thousand twenty-four"."""
    if year >= 2000:
        return english_number(year)
    century, rest = divmod(year, 100)
    if rest == 0:
        return english_number(century) + " hundred"
    if rest < 10:
        return english_number(century) + " oh " + english_number(rest)
    return english_number(century) + " " + english_number(rest)


def german_year(year):
    """1900..1999 -> "neunzehnhundert...", 2000.. -> "zweitausend..."."""
    if year >= 2000:
        return german_number(year)
    century, rest = divmod(year, 100)
    return german_number(century) + "hundert" + ("" if rest == 0 else german_number(rest))


_EN_ORDINAL_WORDS = {"one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth",
                     "nine": "ninth", "twelve": "twelfth"}


def english_ordinal(n):
    """1..99 as an ordinal word: 3 -> "third", 21 -> "twenty-first", 40 -> "fortieth"."""
    words = english_number(n)
    head, _, last = words.rpartition("-")
    if last in _EN_ORDINAL_WORDS:
        last = _EN_ORDINAL_WORDS[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last = last + "th"
    return (head + "-" if head else "") + last


def german_ordinal_stem(n):
    """1..99 as the German ordinal stem: 1 erst, 3 dritt, 7 siebt, 8 acht, 4..19 +t, 20.. +st."""
    special = {1: "erst", 3: "dritt", 7: "siebt", 8: "acht"}
    if n in special:
        return special[n]
    if n < 20:
        return german_number(n) + "t"
    return german_number(n) + "st"


# ---------------------------------------------------------------- vocabulary
MONTHS = [("January", "Januar"), ("February", "Februar"), ("March", "März"), ("April", "April"),
          ("May", "Mai"), ("June", "Juni"), ("July", "Juli"), ("August", "August"),
          ("September", "September"), ("October", "Oktober"), ("November", "November"),
          ("December", "Dezember")]
WEEKDAYS = [("Monday", "Montag"), ("Tuesday", "Dienstag"), ("Wednesday", "Mittwoch"),
            ("Thursday", "Donnerstag"), ("Friday", "Freitag"), ("Saturday", "Samstag"),
            ("Sunday", "Sonntag")]

# English subject, German subject, person key for conjugation.
SUBJECTS = [("I", "ich", "1sg"), ("you", "du", "2sg"), ("he", "er", "3sg"), ("she", "sie", "3sg"),
            ("we", "wir", "1pl"), ("they", "sie", "3pl"), ("my brother", "mein Bruder", "3sg"),
            ("my sister", "meine Schwester", "3sg"), ("the teacher", "der Lehrer", "3sg"),
            ("our neighbours", "unsere Nachbarn", "3pl"), ("the children", "die Kinder", "3pl")]
HABEN = {"1sg": "habe", "2sg": "hast", "3sg": "hat", "1pl": "haben", "3pl": "haben"}
WERDEN = {"1sg": "werde", "2sg": "wirst", "3sg": "wird", "1pl": "werden", "3pl": "werden"}

# English past, English infinitive, English 3sg present, German infinitive,
# German participle, German present by person.
VERBS = [
    ("bought", "buy", "buys", "kaufen", "gekauft",
     {"1sg": "kaufe", "2sg": "kaufst", "3sg": "kauft", "1pl": "kaufen", "3pl": "kaufen"}),
    ("sold", "sell", "sells", "verkaufen", "verkauft",
     {"1sg": "verkaufe", "2sg": "verkaufst", "3sg": "verkauft", "1pl": "verkaufen", "3pl": "verkaufen"}),
    ("ordered", "order", "orders", "bestellen", "bestellt",
     {"1sg": "bestelle", "2sg": "bestellst", "3sg": "bestellt", "1pl": "bestellen", "3pl": "bestellen"}),
    ("saw", "see", "sees", "sehen", "gesehen",
     {"1sg": "sehe", "2sg": "siehst", "3sg": "sieht", "1pl": "sehen", "3pl": "sehen"}),
    ("carried", "carry", "carries", "tragen", "getragen",
     {"1sg": "trage", "2sg": "trägst", "3sg": "trägt", "1pl": "tragen", "3pl": "tragen"}),
]

# English singular, English plural, German singular, German plural, gender.
NOUNS = [("apple", "apples", "Apfel", "Äpfel", "m"), ("bottle", "bottles", "Flasche", "Flaschen", "f"),
         ("book", "books", "Buch", "Bücher", "n"), ("chair", "chairs", "Stuhl", "Stühle", "m"),
         ("ticket", "tickets", "Fahrkarte", "Fahrkarten", "f"), ("egg", "eggs", "Ei", "Eier", "n"),
         ("table", "tables", "Tisch", "Tische", "m"), ("letter", "letters", "Brief", "Briefe", "m"),
         ("cup", "cups", "Tasse", "Tassen", "f"), ("house", "houses", "Haus", "Häuser", "n")]
# English compound, German compound (one word).
COMPOUNDS = [("apple juice", "Apfelsaft"), ("orange juice", "Orangensaft"),
             ("mineral water", "Mineralwasser"), ("red wine", "Rotwein"), ("white wine", "Weißwein"),
             ("tomato soup", "Tomatensuppe"), ("coffee beans", "Kaffeebohnen"),
             ("potato salad", "Kartoffelsalat")]
CONTAINERS = [("bottles", "Flaschen"), ("cups", "Tassen"), ("kilograms", "Kilogramm"),
              ("litres", "Liter"), ("boxes", "Kisten"), ("glasses", "Gläser")]
ONE_ACCUSATIVE = {"m": "einen", "f": "eine", "n": "ein"}
ONE_NOMINATIVE = {"m": "ein", "f": "eine", "n": "ein"}


# ---------------------------------------------------------------- phrases
def _quantity(rng):
    """An object phrase, accusative: ("three hundred chairs", "dreihundert Stühle")."""
    kind = rng.random()
    if kind < 0.15:
        en_sg, _, de_sg, _, gender = rng.choice(NOUNS)
        article = "an" if en_sg[0] in "aeiou" else "a"
        return f"{article} {en_sg}", f"{ONE_ACCUSATIVE[gender]} {de_sg}"
    n = _count(rng)
    if kind < 0.6:
        _, en_pl, _, de_pl, _ = rng.choice(NOUNS)
        return f"{english_number(n)} {en_pl}", f"{german_number(n, standalone=False)} {de_pl}"
    en_c, de_c = rng.choice(CONTAINERS)
    en_x, de_x = rng.choice(COMPOUNDS)
    return f"{english_number(n)} {en_c} of {en_x}", f"{german_number(n, standalone=False)} {de_c} {de_x}"


def _count(rng):
    """A count above one that reads naturally before a plural noun (no ..01)."""
    while True:
        n = rng.choice([rng.randint(2, 20), rng.randint(2, 99), rng.randint(100, 999), rng.randint(1000, 99999)])
        if n % 100 != 1:
            return n


def _clock(rng):
    """("half past seven", "halb acht") and friends; hours 1..12."""
    hour = rng.randint(1, 12)
    following = hour % 12 + 1
    kind = rng.randrange(6)
    if kind == 0:
        return f"{english_number(hour)} o'clock", f"{german_number(hour, standalone=False)} Uhr"
    if kind == 1:
        return f"half past {english_number(hour)}", f"halb {german_number(following)}"
    if kind == 2:
        return f"a quarter past {english_number(hour)}", f"Viertel nach {german_number(hour)}"
    if kind == 3:
        return f"a quarter to {english_number(following)}", f"Viertel vor {german_number(following)}"
    minutes = rng.choice([5, 10, 20])
    if kind == 4:
        return (f"{english_number(minutes)} past {english_number(hour)}",
                f"{german_number(minutes)} nach {german_number(hour)}")
    return (f"{english_number(minutes)} to {english_number(following)}",
            f"{german_number(minutes)} vor {german_number(following)}")


def _date(rng, with_year):
    """("the third of May", "dritte Mai" stem parts) as (english, german_dative_phrase)."""
    day = rng.randint(1, 28 if rng.random() < 0.5 else 31)
    en_month, de_month = rng.choice(MONTHS)
    en = f"the {english_ordinal(day)} of {en_month}"
    de = f"{german_ordinal_stem(day)}en {de_month}"
    if with_year:
        year = rng.randint(1900, 2099)
        en += f" {english_year(year)}"
        de += f" {german_year(year)}"
    return en, de, day, de_month


def _when(rng):
    """A time adverbial: (english, german)."""
    kind = rng.randrange(5)
    if kind == 0:
        return rng.choice([("yesterday", "gestern"), ("last week", "letzte Woche"), ("today", "heute")])
    if kind == 1:
        en_day, de_day = rng.choice(WEEKDAYS)
        return f"on {en_day}", f"am {de_day}"
    if kind == 2:
        en, de = _clock(rng)
        return f"at {en}", f"um {de}"
    en, de, _, _ = _date(rng, with_year=rng.random() < 0.3)
    return f"on {en}", f"am {de}"


def _capitalise(text):
    return text[0].upper() + text[1:]


# ---------------------------------------------------------------- templates
def _number_pair(rng):
    n = rng.choice([rng.randint(0, 99), rng.randint(100, 999), rng.randint(1000, 999999)])
    return english_number(n), german_number(n)


def _date_pair(rng):
    en, de_dative, day, de_month = _date(rng, with_year=rng.random() < 0.4)
    if rng.random() < 0.5:  # nominative: "der dritte Mai"
        nominative = de_dative.replace(f"{german_ordinal_stem(day)}en", f"{german_ordinal_stem(day)}e", 1)
        return _capitalise(en), f"Der {nominative}"
    if rng.random() < 0.5:
        en_day, de_day = rng.choice(WEEKDAYS)
        return f"On {en_day}, {en}", f"Am {de_day}, dem {de_dative}"
    return f"On {en}", f"Am {de_dative}"


def _clock_pair(rng):
    en, de = _clock(rng)
    return f"It is {en}.", f"Es ist {de}."


def _perfect_pair(rng):
    """Verb second, participle last, optionally with the time adverbial first."""
    en_subj, de_subj, person = rng.choice(SUBJECTS)
    en_past, _, _, _, participle, _ = rng.choice(VERBS)
    en_obj, de_obj = _quantity(rng)
    en_when, de_when = _when(rng)
    if rng.random() < 0.5:
        return (f"{_capitalise(en_subj)} {en_past} {en_obj} {en_when}.",
                f"{_capitalise(de_subj)} {HABEN[person]} {de_when} {de_obj} {participle}.")
    return (f"{_capitalise(en_when)}, {en_subj} {en_past} {en_obj}.",
            f"{_capitalise(de_when)} {HABEN[person]} {de_subj} {de_obj} {participle}.")


def _future_pair(rng):
    en_subj, de_subj, person = rng.choice(SUBJECTS)
    _, en_inf, _, de_inf, _, _ = rng.choice(VERBS)
    en_obj, de_obj = _quantity(rng)
    en_when, de_when = _when(rng)
    return (f"{_capitalise(en_subj)} will {en_inf} {en_obj} {en_when}.",
            f"{_capitalise(de_subj)} {WERDEN[person]} {de_when} {de_obj} {de_inf}.")


def _present_pair(rng):
    en_subj, de_subj, person = rng.choice(SUBJECTS)
    _, en_inf, en_3sg, _, _, present = rng.choice(VERBS)
    en_obj, de_obj = _quantity(rng)
    en_verb = en_3sg if person == "3sg" else en_inf
    return f"{_capitalise(en_subj)} {en_verb} {en_obj}.", f"{_capitalise(de_subj)} {present[person]} {de_obj}."


def _subordinate_pair(rng):
    """Finite verb last in the "dass" clause."""
    en_subj, de_subj, person = rng.choice(SUBJECTS)
    en_past, _, _, _, participle, _ = rng.choice(VERBS)
    en_obj, de_obj = _quantity(rng)
    lead_en, lead_de = rng.choice([("I think", "Ich glaube"), ("She knows", "Sie weiß"), ("We heard", "Wir hörten")])
    return (f"{lead_en} that {en_subj} {en_past} {en_obj}.",
            f"{lead_de}, dass {de_subj} {de_obj} {participle} {HABEN[person]}.")


TEMPLATES = [(_number_pair, 3), (_date_pair, 2), (_clock_pair, 1), (_perfect_pair, 3),
             (_future_pair, 2), (_present_pair, 1), (_subordinate_pair, 2)]


def split_of(english):
    """Which split a pair belongs to, from a hash of its English side (1/52 validation, 1/52 test)."""
    bucket = int.from_bytes(hashlib.sha256(english.encode("utf-8")).digest()[:4], "big") % 52
    return "validation" if bucket == 0 else "test" if bucket == 1 else "train"


def random_pair(rng):
    """One (english, german) pair from a template drawn by its weight; repeats are possible."""
    return rng.choices([f for f, _ in TEMPLATES], [w for _, w in TEMPLATES])[0](rng)


def generate(split, size=None, seed=SEED):
    """The pairs (english, german) of `split`, in a fixed order; identical on every run.

    size: how many pairs; defaults to SPLIT_SIZES[split]. Pairs are unique.
    """
    if split not in SPLIT_SIZES:
        raise ValueError(f"Unknown split {split!r}; expected one of {sorted(SPLIT_SIZES)}.")
    size = SPLIT_SIZES[split] if size is None else int(size)
    rng = random.Random(f"{seed}-{split}")
    seen, pairs = set(), []
    while len(pairs) < size:
        english, german = random_pair(rng)
        if english in seen or split_of(english) != split:
            continue
        seen.add(english)
        pairs.append((english, german))
    return pairs
