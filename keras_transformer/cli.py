"""Command-line entry points. Each parses its flags and calls one library function.

`scripts/<name>.py` and the console scripts of setup.cfg (kt-train,
kt-translate, ...) both call these.
"""

import argparse
import dataclasses
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow is imported

from keras_transformer import config as run_config  # noqa: E402
from keras_transformer import presets  # noqa: E402

_CHOICES = {"preset": sorted(presets.PRESETS), "strategy": run_config.STRATEGIES,
            "precision": run_config.PRECISIONS}


def _flag(name):
    return "--" + name.replace("_", "-")


def _train_parser():
    parser = _parser(
        "train.py",
        "Train a Transformer (resuming from its backup if one exists), score the test split "
        "with sacreBLEU and export a SavedModel. With no flags: the small preset on the built-in corpus.",
    )
    for field in dataclasses.fields(run_config.RunConfig):
        help_text = field.metadata.get("help", "")
        if field.type is bool or field.type == "bool":
            parser.add_argument(_flag(field.name), action="store_true", help=help_text)
            continue
        kind = {"int": int, "float": float}.get(str(field.type), None) or (
            field.type if field.type in (int, float) else str
        )
        parser.add_argument(_flag(field.name), type=kind, default=field.default, help=help_text,
                            choices=_CHOICES.get(field.name))
    parser.add_argument("--inspect-data", action="store_true",
                        help="Print what the data pipeline makes of --dataset (pairs, skips, batches, "
                        "padding efficiency) and exit without training.")
    return parser


def train_main(argv=None):
    parser = _train_parser()
    args = vars(parser.parse_args(argv))
    inspect = args.pop("inspect_data")
    try:
        config = run_config.RunConfig(**args)
    except ValueError as error:
        parser.error(str(error))
    from keras_transformer import training  # noqa: PLC0415  (TensorFlow loads only after parsing)

    try:
        if inspect:
            from keras_transformer.data.inspect import format_summary, inspect_data  # noqa: PLC0415

            training.prepare_model_dir(config)  # the vocabulary it trains is kept for training
            print(format_summary(inspect_data(config, training.load_tokenizer(config))))
            return 0
        training.train_and_evaluate(config)
    except (FileNotFoundError, ValueError) as error:
        print(f"train.py: error: {error}", file=sys.stderr)
        return 1
    return 0


def _parser(prog, description):
    # allow_abbrev=False: a misspelt or shortened flag is an error, not a guess.
    return argparse.ArgumentParser(prog=prog, description=description, allow_abbrev=False,
                                   formatter_class=argparse.ArgumentDefaultsHelpFormatter)


def _restored_translator(parser, args):
    """(config, Translator) for --model-dir/--weights/--beam-size/--alpha; exits 1 with a message on failure."""
    from keras_transformer import training  # noqa: PLC0415

    try:
        config, model, tokenizer = training.restore(args.model_dir, args.weights)
    except (FileNotFoundError, ValueError) as error:
        parser.exit(1, f"{parser.prog}: error: {error}\n")
    return config, training.make_translator(config, model, tokenizer, args.beam_size, args.alpha)


def _decoding_flags(parser):
    parser.add_argument("--beam-size", type=int, default=None, help="Beam size (default: the run's, 4).")
    parser.add_argument("--alpha", type=float, default=None, help="Length penalty exponent (default: the run's, 0.6).")
    parser.add_argument("--weights", default=None,
                        help="A .weights.h5 file to use instead of the newest checkpoint (e.g. averaged).")


def translate_main(argv=None):
    parser = _parser(
        "translate.py",
        "Translate sentences, one per line, from a file or stdin to stdout.",
    )
    parser.add_argument("--model", required=True,
                        help="A training model directory (with run_config.json) or an exported SavedModel "
                        "(a version directory, or its base: the highest version is used).")
    parser.add_argument("--input", default="-", help="Input file, one sentence per line; - for stdin.")
    parser.add_argument("--batch-size", type=int, default=32, help="Sentences per decoding batch.")
    _decoding_flags(parser)
    args = parser.parse_args(argv)
    from keras_transformer import inference  # noqa: PLC0415

    try:
        translate = inference.load_translate_function(args.model, args.beam_size, args.alpha, args.weights)
        lines = sys.stdin if args.input == "-" else open(args.input, encoding="utf-8", errors="replace")
        with lines:
            sentences = [line.rstrip("\n") for line in lines]
    except (FileNotFoundError, ValueError) as error:
        parser.exit(1, f"translate.py: error: {error}\n")
    for translation in inference.translate_lines(translate, sentences, args.batch_size):
        print(translation)
    return 0


def evaluate_main(argv=None):
    parser = _parser(
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
    _decoding_flags(parser)
    args = parser.parse_args(argv)
    from keras_transformer import evaluation  # noqa: PLC0415

    config, translator = _restored_translator(parser, args)
    try:
        sentences, references = evaluation.read_split(config, args.split, args.dataset, args.limit)
    except (FileNotFoundError, ValueError) as error:
        parser.exit(1, f"evaluate.py: error: {error}\n")
    output = args.output or os.path.join(args.model_dir, f"{args.split}.hypotheses.txt")
    result = evaluation.evaluate(translator, sentences, references, output, args.batch_size)
    print(f"sacreBLEU {result['bleu']:.2f}  ({result['bleu_signature']})")
    print(f"chrF      {result['chrf']:.2f}  ({result['chrf_signature']})")
    print(f"hypotheses: {result['hypotheses_path']}")
    return 0


def export_main(argv=None):
    parser = _parser(
        "export.py",
        "Export a trained model as a TF Serving SavedModel to <output>/<next version>/.",
    )
    parser.add_argument("--model-dir", required=True, help="The training model directory.")
    parser.add_argument("--output", required=True, help="The model base path, e.g. saved_models/NAME.")
    _decoding_flags(parser)
    args = parser.parse_args(argv)
    from keras_transformer import export  # noqa: PLC0415

    _, translator = _restored_translator(parser, args)
    path = export.export_translator(translator, args.output)
    print(path)
    return 0


def average_main(argv=None):
    parser = _parser(
        "average_checkpoints.py",
        "Average the weights of the last N checkpoints of a run (the paper: 5 for base, 20 for big).",
    )
    parser.add_argument("--model-dir", required=True, help="The training model directory.")
    parser.add_argument("--last", type=int, default=5, help="How many of the newest checkpoints to average.")
    parser.add_argument("--output", required=True, help="The averaged .weights.h5 file to write.")
    args = parser.parse_args(argv)
    from keras_transformer import checkpoints  # noqa: PLC0415

    if args.last < 1:
        parser.error(f"--last must be at least 1; got {args.last}.")
    if not args.output.endswith(".weights.h5"):
        parser.error(f"--output must end in .weights.h5; got {args.output!r}.")
    found = checkpoints.list_checkpoints(os.path.join(args.model_dir, "checkpoints"))
    if len(found) < args.last:
        parser.exit(1, f"average_checkpoints.py: error: asked for the last {args.last} checkpoints but "
                       f"{args.model_dir!r} has {len(found)}; raise --keep-checkpoints when training.\n")
    chosen = found[-args.last:]
    checkpoints.average_checkpoints(chosen, args.output)
    print(f"Averaged {len(chosen)} checkpoints ({os.path.basename(chosen[0])} .. "
          f"{os.path.basename(chosen[-1])}) into {args.output}")
    return 0


def plot_attention_main(argv=None):
    parser = _parser(
        "plot_attention.py",
        "Translate one sentence and save encoder-decoder attention heatmaps, one PNG per layer "
        "with a panel per head.",
    )
    parser.add_argument("--model-dir", required=True, help="The training model directory.")
    parser.add_argument("--sentence", required=True, help="The source sentence.")
    parser.add_argument("--output-dir", default="attention", help="Where the PNG files go.")
    _decoding_flags(parser)
    args = parser.parse_args(argv)
    from keras_transformer import attention_plot  # noqa: PLC0415

    _, translator = _restored_translator(parser, args)
    for path in attention_plot.plot_cross_attention(translator, args.sentence, args.output_dir):
        print(path)
    return 0


def benchmark_main(argv=None):
    parser = _parser(
        "benchmark.py",
        "Measure, in one run: peak matmul GFLOP/s, training throughput (float32, mixed_bfloat16, "
        "and a keras-hub model of the same size), cached against uncached beam search, and optionally the "
        "padding efficiency of bucketed batches on a corpus. Ratios carry the claims.",
    )
    parser.add_argument("--preset", default="base", choices=sorted(presets.PRESETS), help="Model size to time.")
    parser.add_argument("--vocab-size", type=int, default=37000, help="Vocabulary of the timed models.")
    parser.add_argument("--batch-tokens", type=int, default=4096, help="Target tokens per training batch.")
    parser.add_argument("--length", type=int, default=32, help="Tokens per sentence in the training batches.")
    parser.add_argument("--train-steps", type=int, default=5, help="Timed training steps per model.")
    parser.add_argument("--decode-batch", type=int, default=8, help="Sentences per beam search batch.")
    parser.add_argument("--output-length", type=int, default=40, help="Output pieces per decoded sentence.")
    parser.add_argument("--corpus", default=None, help="A TSV corpus for the padding-efficiency figure.")
    parser.add_argument("--skip-training", action="store_true", help="Leave out the training figures.")
    args = parser.parse_args(argv)
    from keras_transformer import benchmark  # noqa: PLC0415

    benchmark.run_benchmark(args.preset, args.vocab_size, args.batch_tokens, args.length, args.train_steps,
                            args.decode_batch, args.output_length, args.corpus, args.skip_training)
    return 0
