"""`scripts/mix_backtranslation.py`."""

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
