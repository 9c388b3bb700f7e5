"""`scripts/translate.py`, `scripts/evaluate.py` and `scripts/plot_attention.py`."""

import os
import sys

from keras_transformer.cli.common import decoding_flags, make_parser, record_flag, restored_translator
from keras_transformer.run_dir import RunDir


def _sampling_flags(parser):
    group = parser.add_argument_group(
        "sampling", "Random sampling instead of beam search (e.g. for back-translation, Edunov et al., 2018); "
        "any of these flags turns it on. One translation per sentence; training model directories only.")
    group.add_argument("--sampling-topk", type=int, default=None,
                       help="Sample among the K most likely pieces; 0 = the full distribution (default when "
                       "sampling).")
    group.add_argument("--sampling-topp", type=float, default=None,
                       help="Sample among the smallest set of pieces whose probability reaches P, in (0, 1] "
                       "(nucleus sampling; default 1).")
    group.add_argument("--sampling-temperature", type=float, default=None,
                       help="Divide the logits by T > 0 before sampling; towards 0 it becomes greedy (default 1).")
    group.add_argument("--seed", type=int, default=0,
                       help="Sampling seed: the same seed and input give the same translations.")


def _sampling(parser, args):
    """The Translator's `sampling` dict from the flags, or None; exits 2 naming a bad value."""
    given = {"top_k": args.sampling_topk, "top_p": args.sampling_topp, "temperature": args.sampling_temperature}
    given = {k: v for k, v in given.items() if v is not None}
    if not given:
        return None
    from keras_transformer.decoding.sampling import check_sampling  # noqa: PLC0415

    try:
        check_sampling(**given)
    except ValueError as error:
        parser.error(str(error).replace("sampling top-k", "--sampling-topk").replace(
            "sampling top-p", "--sampling-topp").replace("sampling temperature", "--sampling-temperature"))
    if args.n_best != 1:
        parser.error(f"--n-best applies to beam search; sampling gives one translation per sentence, "
                     f"got --n-best {args.n_best}.")
    return {**given, "seed": args.seed}


def _terminology_flags(parser):
    group = parser.add_argument_group(
        "terminology", "Lexically constrained beam search (dynamic beam allocation, Post and Vilar, 2018) and "
        "forced prefixes: training directories and SavedModels; a CTranslate2 model takes prefixes only.")
    group.add_argument("--constraints", default=None, metavar="FILE",
                       help="One line per input sentence: the target phrases its translation must contain, "
                       "separated by tabs (an empty line: none). At most beam-size phrases a sentence.")
    group.add_argument("--glossary", default=None, metavar="TSV",
                       help="'source term<TAB>target term' lines: every input sentence that contains a source "
                       "term (whole words, case as given) gets its target term as a constraint, after those "
                       "of --constraints.")
    group.add_argument("--prefix", default=None, metavar="FILE",
                       help="One line per input sentence: the words its translation must start with (an empty "
                       "line: none).")


def read_terms(sentences, constraints_path=None, glossary_path=None, prefix_path=None):
    """(constraints, prefixes) for `sentences` from the files of --constraints,
    --glossary and --prefix (None where not given); FileNotFoundError or
    ValueError naming the bad file."""
    from keras_transformer.decoding import terminology  # noqa: PLC0415

    constraints = None
    if constraints_path:
        constraints = terminology.read_constraints(constraints_path, sentences)
    if glossary_path:
        terms = terminology.glossary_constraints(terminology.read_glossary(glossary_path), sentences)
        constraints = terms if constraints is None else [
            given + [term for term in found if term not in given] for given, found in zip(constraints, terms)]
    prefixes = terminology.read_prefixes(prefix_path, sentences) if prefix_path else None
    return constraints, prefixes


def _translate_parser():
    """translate.py's flags."""
    parser = make_parser(
        "translate.py",
        "Translate sentences, one per line, from a file or stdin to stdout. With --n-best N (N > 1), print "
        "N hypotheses per sentence as TSV lines: input index (from 0), rank (0 = best), score, translation.",
    )
    parser.add_argument("--model", required=True, action="append",
                        help="A training model directory (with run_config.json), an exported SavedModel "
                        "(a version directory, or its base: the highest version is used), or a CTranslate2 "
                        "directory from export.py --format ctranslate2 (needs the ctranslate2 extra). "
                        "Repeat it with training directories of one vocabulary to decode with their ensemble "
                        "(their next-piece probabilities averaged, as in fairseq).")
    parser.add_argument("--input", default="-", help="Input file, one sentence per line; - for stdin.")
    parser.add_argument("--batch-size", type=int, default=32, help="Sentences per decoding batch.")
    parser.add_argument("--threads", type=int, default=0,
                        help="CPU threads of a CTranslate2 model (0: its default); TensorFlow picks its own.")
    parser.add_argument("--n-best", type=int, default=1,
                        help="Hypotheses per sentence, at most the beam size; above 1 the output is TSV (see "
                        "above). Training model directories only.")
    decoding_flags(parser)
    _sampling_flags(parser)
    _terminology_flags(parser)
    return parser


def translate_main(argv=None):
    parser = _translate_parser()
    args = parser.parse_args(argv)
    if args.threads < 0:
        parser.error(f"--threads must be 0 or more; got {args.threads}.")
    if args.batch_size < 1:
        parser.error(f"--batch-size must be at least 1; got {args.batch_size}.")
    if args.n_best < 1:
        parser.error(f"--n-best must be at least 1; got {args.n_best}.")
    sampling = _sampling(parser, args)
    if sampling and (args.constraints or args.glossary or args.prefix):
        parser.error("--constraints, --glossary and --prefix steer beam search; they do not combine with sampling.")
    from keras_transformer.export import loading  # noqa: PLC0415

    try:
        translator = loading.load_translator(args.model, args.beam_size, args.alpha, args.weights, args.threads,
                                             args.n_best, sampling, args.precision, args.no_repeat_ngram_size,
                                             args.repetition_penalty)
        lines = sys.stdin if args.input == "-" else open(args.input, encoding="utf-8", errors="replace")
        with lines:
            sentences = [line.rstrip("\n") for line in lines]
        constraints, prefixes = read_terms(sentences, args.constraints, args.glossary, args.prefix)
        if args.n_best > 1:
            output = list(loading.n_best_lines(translator, sentences, args.batch_size, constraints, prefixes))
        else:
            output = loading.translate_lines(translator, sentences, args.batch_size, constraints, prefixes)
    except (FileNotFoundError, ValueError) as error:
        parser.exit(1, f"translate.py: error: {error}\n")
    if args.n_best > 1:
        for line in output:
            print(line)
        return 0
    for translation in output:
        # One line per input, even when a (sampled) translation holds a line break.
        print(translation.replace("\r", " ").replace("\n", " "))
    return 0


def _evaluate_parser():
    """evaluate.py's flags."""
    parser = make_parser(
        "evaluate.py",
        "Decode a split and print sacreBLEU (detokenized, with its signature), chrF, and the path "
        "of the written hypotheses.",
    )
    parser.add_argument("--model-dir", required=True, help="The training model directory.")
    parser.add_argument("--split", default="test", help="Split of the run's dataset: train, validation or test.")
    parser.add_argument("--dataset", default=None,
                        help="Evaluate on this dataset instead (tfds name, PATH.tsv or SOURCE,TARGET).")
    parser.add_argument("--limit", type=int, default=None, help="Only the first N pairs.")
    parser.add_argument("--batch-size", type=int, default=64, help="Sentences per decoding batch.")
    parser.add_argument("--output", default=None,
                        help="Hypotheses file (default: <model-dir>/<split>.hypotheses.txt).")
    parser.add_argument("--constraints", default=None, metavar="FILE",
                        help="Target phrases per source sentence of the split, as translate.py takes them: the "
                        "split is decoded with and without them, and the term-use rate of both is reported (the "
                        "constrained hypotheses go to --output, the others beside it, .unconstrained.txt).")
    parser.add_argument("--glossary", default=None, metavar="TSV",
                        help="'source term<TAB>target term' lines, as translate.py takes them; as --constraints.")
    decoding_flags(parser)
    record_flag(parser)
    return parser


def evaluate_main(argv=None):
    parser = _evaluate_parser()
    args = parser.parse_args(argv)
    from keras_transformer.data import sources  # noqa: PLC0415
    from keras_transformer.decoding import evaluation  # noqa: PLC0415

    config, translator = restored_translator(parser, args)
    try:
        sentences, references = sources.read_split(config.data, args.split, args.dataset, args.limit)
    except (FileNotFoundError, ValueError) as error:
        parser.exit(1, f"evaluate.py: error: {error}\n")
    output = args.output or RunDir(args.model_dir).hypotheses_path(args.split)
    try:
        constraints, _ = read_terms(sentences, args.constraints, args.glossary)
    except (FileNotFoundError, ValueError) as error:
        parser.exit(1, f"evaluate.py: error: {error}\n")
    figures = {}
    if constraints is None:
        figures["scores"] = _print_evaluation(evaluation.evaluate(translator, sentences, references, output,
                                                                  args.batch_size))
        _record_evaluation(args, argv, config, translator, len(sentences), figures)
        return 0
    from keras_transformer.decoding.terminology import term_use  # noqa: PLC0415

    unconstrained = os.path.splitext(output)[0] + ".unconstrained.txt"
    for label, path, terms in (("unconstrained", unconstrained, None), ("constrained", output, constraints)):
        try:
            result = evaluation.evaluate(translator, sentences, references, path, args.batch_size, terms)
        except ValueError as error:
            parser.exit(1, f"evaluate.py: error: {error}\n")
        used, total = term_use(result["hypotheses"], constraints)
        print(f"{label}:")
        figures[label] = {**_print_evaluation(result), "term_use": 100.0 * used / max(total, 1)}
        print(f"term use  {figures[label]['term_use']:.2f}% ({used} of {total} constraints)")
    _record_evaluation(args, argv, config, translator, len(sentences), figures)
    return 0


def _record_evaluation(args, argv, config, translator, sentences, figures):
    """With --record: evaluate.py's record, its scores under the split's name ("dev" for validation)."""
    if not args.record:
        return
    from keras_transformer.cli import records  # noqa: PLC0415

    corpus = {"dataset": args.dataset or config.dataset, "split": args.split, "sentences": sentences,
              "model_dir": args.model_dir, "from_run": args.dataset is None}
    decoding = {"beam_size": translator.beam_size, "alpha": translator.alpha,
                "no_repeat_ngram_size": translator.no_repeat_ngram_size,
                "repetition_penalty": translator.repetition_penalty}
    scores = figures.pop("scores", None)
    scores = scores and {**scores, "sentences": sentences}
    split = {"validation": "dev", "test": "test"}.get(args.split, args.split)
    record = records.make("evaluate", records.command_line("evaluate.py", sys.argv[1:] if argv is None else argv),
                          translator.models[0].dtype_policy.name, corpus, {**decoding, **figures},
                          **({split: scores} if scores else {}))
    print(f"Record written to {records.write(args.record, record)}")


def _print_evaluation(result):
    """Prints `evaluation.evaluate`'s scores; returns them without the hypotheses."""
    print(f"sacreBLEU {result['bleu']:.2f}  ({result['bleu_signature']})")
    print(f"chrF      {result['chrf']:.2f}  ({result['chrf_signature']})")
    print(f"hypotheses: {result['hypotheses_path']}")
    return {key: value for key, value in result.items() if key != "hypotheses"}


def plot_attention_main(argv=None):
    parser = make_parser(
        "plot_attention.py",
        "Translate one sentence and save encoder-decoder attention heatmaps, one PNG per layer "
        "with a panel per head.",
    )
    parser.add_argument("--model-dir", required=True, help="The training model directory.")
    parser.add_argument("--sentence", required=True, help="The source sentence.")
    parser.add_argument("--output-dir", default="attention", help="Where the PNG files go.")
    decoding_flags(parser)
    args = parser.parse_args(argv)
    from keras_transformer.plots import attention  # noqa: PLC0415

    _, translator = restored_translator(parser, args)
    for path in attention.plot_cross_attention(translator, args.sentence, args.output_dir):
        print(path)
    return 0
