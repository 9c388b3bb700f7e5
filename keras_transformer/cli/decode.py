"""`scripts/translate.py`, `scripts/evaluate.py` and `scripts/plot_attention.py`."""

import sys

from keras_transformer.cli.common import decoding_flags, make_parser, restored_translator
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


def translate_main(argv=None):
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
    args = parser.parse_args(argv)
    if args.threads < 0:
        parser.error(f"--threads must be 0 or more; got {args.threads}.")
    if args.batch_size < 1:
        parser.error(f"--batch-size must be at least 1; got {args.batch_size}.")
    if args.n_best < 1:
        parser.error(f"--n-best must be at least 1; got {args.n_best}.")
    sampling = _sampling(parser, args)
    from keras_transformer.export import loading  # noqa: PLC0415

    try:
        translator = loading.load_translator(args.model, args.beam_size, args.alpha, args.weights, args.threads,
                                             args.n_best, sampling, args.precision, args.no_repeat_ngram_size,
                                             args.repetition_penalty)
        lines = sys.stdin if args.input == "-" else open(args.input, encoding="utf-8", errors="replace")
        with lines:
            sentences = [line.rstrip("\n") for line in lines]
    except (FileNotFoundError, ValueError) as error:
        parser.exit(1, f"translate.py: error: {error}\n")
    if args.n_best > 1:
        for line in loading.n_best_lines(translator, sentences, args.batch_size):
            print(line)
        return 0
    for translation in loading.translate_lines(translator, sentences, args.batch_size):
        # One line per input, even when a (sampled) translation holds a line break.
        print(translation.replace("\r", " ").replace("\n", " "))
    return 0


def evaluate_main(argv=None):
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
    decoding_flags(parser)
    args = parser.parse_args(argv)
    from keras_transformer.data import sources  # noqa: PLC0415
    from keras_transformer.decoding import evaluation  # noqa: PLC0415

    config, translator = restored_translator(parser, args)
    try:
        sentences, references = sources.read_split(config.data, args.split, args.dataset, args.limit)
    except (FileNotFoundError, ValueError) as error:
        parser.exit(1, f"evaluate.py: error: {error}\n")
    output = args.output or RunDir(args.model_dir).hypotheses_path(args.split)
    result = evaluation.evaluate(translator, sentences, references, output, args.batch_size)
    print(f"sacreBLEU {result['bleu']:.2f}  ({result['bleu_signature']})")
    print(f"chrF      {result['chrf']:.2f}  ({result['chrf_signature']})")
    print(f"hypotheses: {result['hypotheses_path']}")
    return 0


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
