"""`scripts/mix_backtranslation.py` and `scripts/make_glossary.py`."""

from keras_transformer.cli.common import make_parser


def mix_backtranslation_main(argv=None):
    parser = make_parser(
        "mix_backtranslation.py",
        "Mix back-translated pairs with a real corpus into two line-aligned files for train.py "
        "--dataset SOURCE,TARGET: synthetic pairs first, real ones last; with --held-out, also the real "
        "corpus' validation and test pairs, so that the run on the mix is scored on real text.",
    )
    parser.add_argument("--synthetic", required=True,
                        help="SOURCES,TARGETS: the reverse model's translations (e.g. from translate.py with "
                        "--sampling-topk 0) and the monolingual text they translate, line by line.")
    parser.add_argument("--real", required=True, help="SOURCES,TARGETS: the real parallel corpus.")
    parser.add_argument("--output", required=True,
                        help="SOURCES,TARGETS: the two files to write (the train.py --dataset value).")
    parser.add_argument("--tag", nargs="?", const="<BT>", default=None,
                        help="Start every synthetic source with this tag (tagged back-translation, Caswell et "
                        "al., 2019); --tag alone uses <BT>. Without it, synthetic sources are left as they are.")
    parser.add_argument("--held-out", default=None, metavar="PREFIX",
                        help="Also write the validation and test pairs that train.py draws from the real corpus "
                        "to PREFIX.validation.tsv and PREFIX.test.tsv; pass them to train.py --validation and "
                        "--test for the run on the mix.")
    args = parser.parse_args(argv)
    files = {}
    for name in ("synthetic", "real", "output"):
        parts = getattr(args, name).split(",")
        if len(parts) != 2 or not all(parts):
            parser.error(f"--{name} takes SOURCES,TARGETS (two paths and a comma); got {getattr(args, name)!r}.")
        files[name] = parts
    if args.tag is not None and (not args.tag.strip() or any(c.isspace() for c in args.tag)):
        parser.error(f"--tag must be one word without spaces; got {args.tag!r}.")
    from keras_transformer.data import backtranslation  # noqa: PLC0415

    try:
        counts = backtranslation.mix(*files["synthetic"], *files["real"], *files["output"], tag=args.tag,
                                    held_out_prefix=args.held_out)
    except (FileNotFoundError, ValueError) as error:
        parser.exit(1, f"mix_backtranslation.py: error: {error}\n")
    print(f"Wrote {counts['synthetic'] + counts['real']} pairs to {args.output}: {counts['synthetic']} synthetic"
          f"{' (tagged ' + args.tag + ')' if args.tag else ''}, then {counts['real']} real; "
          f"{counts['skipped_empty']} synthetic pair(s) with an empty side left out.")
    if args.held_out:
        print(f"Held out from the real corpus: {counts['validation']} validation pairs in "
              f"{args.held_out}.validation.tsv, {counts['test']} test pairs in {args.held_out}.test.tsv.")
    return 0


def make_glossary_main(argv=None):
    parser = make_parser(
        "make_glossary.py",
        "Draw a glossary of UI terms from a parallel corpus (keras_transformer.data.glossary): capitalised "
        "source terms and the target term each co-occurs with most consistently (Dice's coefficient). "
        "Writes 'source term<TAB>target term' lines, the file translate.py and evaluate.py take with "
        "--glossary. Read it before use: a few pairings can be wrong.",
    )
    parser.add_argument("--corpus", required=True,
                        help="PATH.tsv or SOURCE,TARGET: the corpus' training part, never its test split.")
    parser.add_argument("--output", required=True, help="The glossary TSV to write.")
    parser.add_argument("--size", type=int, default=60, help="How many terms, the most consistent first.")
    parser.add_argument("--min-count", type=int, default=8,
                        help="A term must occur in at least this many pairs.")
    parser.add_argument("--min-dice", type=float, default=0.6,
                        help="Least Dice's coefficient between a source term and its target term, in (0, 1].")
    parser.add_argument("--max-words", type=int, default=3, help="Longest term, in words.")
    parser.add_argument("--identical", action="store_true",
                        help="Also keep terms the target leaves as they are (names of products and functions).")
    args = parser.parse_args(argv)
    for flag, value, low in (("--size", args.size, 1), ("--min-count", args.min_count, 1),
                             ("--max-words", args.max_words, 1)):
        if value < low:
            parser.error(f"{flag} must be at least {low}; got {value}.")
    if not 0.0 < args.min_dice <= 1.0:
        parser.error(f"--min-dice must be in (0, 1]; got {args.min_dice}.")
    from keras_transformer.data.glossary import extract_glossary  # noqa: PLC0415
    from keras_transformer.data.local_corpus import read_held_out  # noqa: PLC0415  (all pairs of a file)

    try:
        pairs = read_held_out(args.corpus)
    except (FileNotFoundError, ValueError) as error:
        parser.exit(1, f"make_glossary.py: error: {error}\n")
    terms = extract_glossary(pairs, args.size, args.max_words, args.min_count, args.min_dice, args.identical)
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(f"# {len(terms)} terms from {args.corpus} (make_glossary.py): source<TAB>target\n")
        f.writelines(f"{source}\t{target}\n" for source, target, _, _ in terms)
    print(f"{len(terms)} terms written to {args.output}")
    return 0
