"""Flags and helpers shared by the command-line entry points."""

import argparse

from keras_transformer.config import PAPER_ALPHA


def make_parser(prog, description):
    # allow_abbrev=False: a misspelt or shortened flag is an error, not a guess.
    return argparse.ArgumentParser(prog=prog, description=description, allow_abbrev=False,
                                   formatter_class=argparse.ArgumentDefaultsHelpFormatter)


def restored_translator(parser, args, **options):
    """(config, Translator) for --model-dir/--weights/--beam-size/--alpha/--precision,
    and `options` for the Translator (n_best); exits 1 with a message on failure."""
    from keras_transformer.decoding import restore  # noqa: PLC0415

    try:
        config, model, tokenizer = restore.restore(args.model_dir, args.weights, args.precision)
        return config, restore.make_translator(config.decoding, model, tokenizer, args.beam_size, args.alpha,
                                               args.no_repeat_ngram_size, args.repetition_penalty, **options)
    except (FileNotFoundError, ValueError) as error:
        parser.exit(1, f"{parser.prog}: error: {error}\n")


ALPHA_HELP = (f"Length penalty exponent (default: the run's, {PAPER_ALPHA} unless it set another). Every "
              "engine divides log P by GNMT's ((5 + length) / 6)^alpha; a CTranslate2 model's own hypotheses are "
              "reranked so, and agree with ours on most sentences, on all at alpha 0.")


def decoding_flags(parser):
    parser.add_argument("--beam-size", type=int, default=None, help="Beam size (default: the run's, 4).")
    parser.add_argument("--alpha", type=float, default=None, help=ALPHA_HELP)
    parser.add_argument("--no-repeat-ngram-size", type=int, default=None, metavar="N",
                        help="Decoding guard: no output repeats an n-gram of N pieces, as CTranslate2's "
                        "no_repeat_ngram_size (default: the run's, 0 = off).")
    parser.add_argument("--repetition-penalty", type=float, default=None, metavar="P",
                        help="Decoding guard: divide the logits of pieces already in the output by P (multiply "
                        "if negative), as CTranslate2's repetition_penalty (default: the run's, 1 = off).")
    parser.add_argument("--weights", default=None,
                        help="A .weights.h5 file to use instead of the run's chosen model (e.g. averaged).")
    precision_flag(parser)


def precision_flag(parser):
    from keras_transformer.modeling.precision import PRECISIONS  # noqa: PLC0415

    parser.add_argument("--precision", default=None, choices=PRECISIONS,
                        help="The Keras dtype policy to compute in (default: the one the run trained in, "
                        "recorded in its run_config.json; auto: this machine's choice). Another policy "
                        "can translate differently; training model directories only.")


def record_flag(parser):
    parser.add_argument("--record", default=None, metavar="DIR",
                        help="Write this run's figures as a record (command, commit, machine, precision, corpus: "
                        "keras_transformer/cli/records.py) into DIR as a new JSON file; results/ holds those "
                        "the docs cite.")
