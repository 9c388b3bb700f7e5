"""`scripts/benchmark.py`."""

import argparse
import os
import tempfile

from keras_transformer.config import BATCH_TOKENS, RunConfig
from keras_transformer.run_dir import default_model_dir
from keras_transformer.modeling import presets
from keras_transformer.cli.common import make_parser, record_flag

# The eole comparison's defaults (benchmarks/eole_peer.py, in the repository, not installed): eole's
# learning rates first tried, as multiples of this package's peak rate, and the runs beyond the
# sweep's ends while its best is the lowest or the highest tried.
PEER_RATES = (0.25, 0.5, 1.0)
PEER_EXTRA_RUNS = 2
# The modes that drive another toolkit or child processes: only `scripts/benchmark.py`, from a clone, runs them.
LAB_FLAGS = ("peer_eole", "onednn", "streaming_pairs")


def parser():
    parser = make_parser(
        "benchmark.py",
        "Measure, in one run: peak matmul GFLOP/s, training throughput (float32, mixed_bfloat16, "
        "and a keras-hub model of the same size), cached against uncached beam search, optionally the "
        "padding efficiency of bucketed batches on a corpus, and beam search in our float32 and "
        "mixed_bfloat16 against CTranslate2 float32 and int8 on the same weights, and optionally memory and "
        "start-up time of training on a large local corpus. Ratios carry the claims.",
    )
    parser.add_argument("--preset", default="base", choices=sorted(presets.PRESETS), help="Model size to time.")
    parser.add_argument("--vocab-size", type=int, default=37000, help="Vocabulary of the timed models.")
    parser.add_argument("--batch-tokens", type=int, default=BATCH_TOKENS,
                        help="Target tokens per training batch (default: %(default)s, as a run's).")
    parser.add_argument("--length", type=int, default=32, help="Tokens per sentence in the training batches.")
    parser.add_argument("--train-steps", type=int, default=5, help="Timed training steps per model.")
    parser.add_argument("--decode-batch", type=int, default=8, help="Sentences per beam search batch.")
    parser.add_argument("--output-length", type=int, default=40, help="Output pieces per decoded sentence.")
    parser.add_argument("--corpus", default=None,
                        help="A TSV corpus for the padding-efficiency figure (with --serving: the sentences to "
                        "translate, from its first column).")
    parser.add_argument("--skip-training", action="store_true", help="Leave out the training figures.")
    parser.add_argument("--steps-per-execution", type=int, default=0, metavar="N",
                        help="Only this comparison: model.fit tokens/s of the small and base presets with 1 "
                        "update per call into the graph against N (0: skip).")
    parser.add_argument("--onednn", action="store_true",
                        help="Only this comparison: float32 model.fit tokens/s and beam-search sentences/s of "
                        "--preset with TensorFlow's oneDNN kernels off (TF_ENABLE_ONEDNN_OPTS=0) against on (1, "
                        "what scripts/*.py set unless the variable is set), each in fresh processes, in turn, "
                        "the best of two each (--vocab-size, --batch-tokens, --length, --train-steps, "
                        "--decode-batch and --output-length apply).")
    parser.add_argument("--engines-batch", type=int, default=32,
                        help="Sentences per batch when comparing our beam search with CTranslate2's.")
    parser.add_argument("--streaming-pairs", type=int, default=0,
                        help="Also time training's start on generated TSV corpora of this many pairs and a "
                        "tenth of it: peak RSS and seconds to the first update, each in a fresh process "
                        "(the README uses 4500000, WMT14's size; 0: skip).")
    _serving_flags(parser)
    _constrained_flags(parser)
    _peer_flags(parser)
    record_flag(parser)
    return parser


def _serving_flags(parser):
    """--serving and its settings."""
    group = parser.add_argument_group(
        "serving", "With --serving, only this comparison runs: a trained run's SavedModel (through "
        "serving_default, as TF Serving calls it) and in-process Translator against CTranslate2 float32 and "
        "int8 on the same weights, batch-1 latency and batch-32 throughput on real sentences.")
    main_job_run = _main_job_run()
    group.add_argument("--serving", nargs="?", const=main_job_run, default=None, metavar="MODEL_DIR",
                       help="The training model directory to serve (without a value: the main job's, "
                       f"{main_job_run}; if it holds no run yet, the main job's first --serving-quick-steps "
                       "updates are trained into a temporary directory first). Its sentences: --corpus's "
                       "source side if given, else its own test split.")
    group.add_argument("--serving-baseline", default=None, metavar="MODEL_DIR",
                       help="Another run of the same data (e.g. of other depths) whose SavedModel is timed in the "
                       "same rounds on the same sentences; the report gives the speed ratio to it.")
    group.add_argument("--serving-sentences", type=int, default=500, help="How many sentences to translate.")
    group.add_argument("--serving-rounds", type=int, default=2, help="Passes per figure; the best counts.")
    group.add_argument("--serving-quick-steps", type=int, default=200,
                       help="Updates of the stand-in run trained when --serving has no value and the main "
                       "job has not run (200: about 3 minutes on 2 cores).")


def _constrained_flags(parser):
    """--constrained and its settings."""
    terms = parser.add_argument_group(
        "terminology", "With --constrained, only this comparison runs: a trained run's beam search without and "
        "with two constraints a sentence (the two longest words of its reference), batch-1 latency and "
        "batch --engines-batch throughput, and the term-use rate of both.")
    terms.add_argument("--constrained", default=None, metavar="MODEL_DIR",
                       help="The training model directory to time. Its sentences: --corpus's pairs if given, "
                       "else its own test split.")
    terms.add_argument("--constrained-sentences", type=int, default=300, help="How many sentences to translate.")
    terms.add_argument("--constrained-rounds", type=int, default=2, help="Passes per figure; the best counts.")


def _peer_flags(parser):
    """--peer-eole and its settings (the harness is in the repository's benchmarks/)."""
    peer = parser.add_argument_group(
        "peer", "With --peer-eole, only this comparison runs: this package's default recipe, then eole (OpenNMT's "
        "PyTorch toolkit, in its own virtual environment) at its best on the same split: the same model size, "
        "SentencePiece model, precision where eole has it and target tokens per update, a cosine schedule "
        "that ends at zero, and the best of three learning rates (up to five: while the best is the lowest or "
        "highest tried, one beyond it is tried), each a --time-budget run, with its checkpoint chosen on the "
        "validation pairs; both scored on --test (docs/benchmarks.md). The command takes four to six budgets "
        "and a few minutes.")
    peer.add_argument("--peer-eole", metavar="EOLE", default=None,
                      help="The `eole` command to compare with, e.g. eole-venv/bin/eole.")
    peer.add_argument("--dataset", help="With --peer-eole: the training corpus, a TSV as train.py takes it.")
    peer.add_argument("--test", help="With --peer-eole: the test TSV both sides are scored on.")
    peer.add_argument("--time-budget", default=argparse.SUPPRESS,  # absent unless given: --peer-ours refuses it
                      help="With --peer-eole: minutes of each run (25, 90m, 1.5h; default 25); this package's "
                      "budget also covers its model choice, and each of eole's its share of build_vocab.")
    peer.add_argument("--peer-rates", default=",".join(f"{f:g}" for f in PEER_RATES), metavar="F,F,...",
                      help="With --peer-eole: eole's learning rates to try first, as multiples of this package's "
                      "peak rate (default %(default)s); while the best is the lowest or the highest tried, up to "
                      f"{PEER_EXTRA_RUNS} more are tried beyond it.")
    peer.add_argument("--peer-ours", default=None, metavar="MODEL_DIR",
                      help="With --peer-eole: compare with this package's run already finished in MODEL_DIR "
                      "(by train.py --time-budget M --test T) instead of training one; eole gets its split, "
                      "SentencePiece model and budget, so --dataset, --test and --time-budget are not given.")
    peer.add_argument("--peer-dir", default="runs/eole_peer",
                      help="With --peer-eole: where both sides' runs go (ours/ and eole/ in it). Given the "
                      "folder of an earlier call with the same flags (one that was stopped, say), the command goes "
                      "on from it: the runs, vocabulary and speed probes that call finished on the same inputs are "
                      "taken as they are, the rest is done again.")


def record(args, argv, kind, precision, corpus, figures):
    """With --record: this mode's record (`cli.records`) in that folder."""
    if not args.record:
        return
    import sys  # noqa: PLC0415

    from keras_transformer.cli import records  # noqa: PLC0415

    command = records.command_line("benchmark.py", sys.argv[1:] if argv is None else argv)
    print(f"Record written to {records.write(args.record, records.make(kind, command, precision, corpus, figures))}")


def _main_job_run():
    main_job = RunConfig()
    return default_model_dir(main_job.dataset, main_job.preset)  # a tfds name is its own folder name


def _check_at_least_one(parser, args, names):
    for name in names:
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1; got {getattr(args, name)}.")


def _serving_main(parser, args, argv=None):
    """--serving: the SavedModel and Translator against CTranslate2 on a trained run."""
    _check_at_least_one(parser, args, ("serving_sentences", "serving_rounds", "serving_quick_steps"))
    from keras_transformer.benchmarks import serving  # noqa: PLC0415
    from keras_transformer.run_dir import RunDir  # noqa: PLC0415

    def figures(model_dir):
        measured = serving.serving_figures(model_dir, args.corpus, args.serving_sentences,
                                           batch_size=args.engines_batch, rounds=args.serving_rounds,
                                           baseline=args.serving_baseline)
        config = RunDir(model_dir).load_config()
        corpus = {"dataset": args.corpus or config.dataset, "split": None if args.corpus else "test",
                  "sentences": args.serving_sentences, "model_dir": args.serving}
        stand_in = {} if model_dir == args.serving else {"stand_in_updates": args.serving_quick_steps}
        baseline = {"baseline": args.serving_baseline} if args.serving_baseline else {}
        record(args, argv, "serving", config.precision, corpus,
               {"preset": config.preset, "beam_size": config.beam_size, "batch_size": args.engines_batch,
                **stand_in, **baseline, **measured})

    main_job_run = _main_job_run()
    try:
        if args.serving != main_job_run or RunDir(main_job_run).has_config():
            figures(args.serving)
            return 0
        with tempfile.TemporaryDirectory() as directory:
            print(f"serving: no run in {main_job_run} (the main job, `python scripts/train.py`); training "
                  f"its first {args.serving_quick_steps} updates in {directory} to serve instead", flush=True)
            figures(serving.quick_run(os.path.join(directory, "run"), args.serving_quick_steps))
    except (FileNotFoundError, ValueError) as error:
        parser.exit(1, f"benchmark.py: error: {error}\n")
    return 0


def _constrained_main(parser, args, argv=None):
    """--constrained: plain against constrained beam search on a trained run."""
    _check_at_least_one(parser, args, ("constrained_sentences", "constrained_rounds", "engines_batch"))
    from keras_transformer.benchmarks import constrained  # noqa: PLC0415

    try:
        measured = constrained.constrained_figures(args.constrained, args.corpus, args.constrained_sentences,
                                                   args.engines_batch, args.constrained_rounds)
        from keras_transformer.run_dir import RunDir  # noqa: PLC0415

        config = RunDir(args.constrained).load_config()
        record(args, argv, "constrained", config.precision,
                {"dataset": args.corpus or config.dataset, "split": None if args.corpus else "test",
                 "sentences": args.constrained_sentences, "model_dir": args.constrained}, measured)
    except (FileNotFoundError, ValueError) as error:
        parser.exit(1, f"benchmark.py: error: {error}\n")
    return 0


def check_speed_flags(parser, args):
    """The flags of the speed modes (this one's, --onednn's and --streaming-pairs') in range, else a usage error."""
    if args.streaming_pairs < 0:
        parser.error(f"--streaming-pairs must be at least 0; got {args.streaming_pairs}.")
    _check_at_least_one(parser, args, ("vocab_size", "batch_tokens", "length", "train_steps", "decode_batch",
                                       "output_length", "engines_batch"))


def synthetic_corpus(args):
    """The generated batches the speed modes time, as their records name them."""
    return {"dataset": "synthetic", "vocab_size": args.vocab_size, "batch_tokens": args.batch_tokens,
            "length": args.length, "decode_batch": args.decode_batch, "output_length": args.output_length}


def _speed_main(parser, args, argv=None):
    """Training and decoding speed on random weights."""
    check_speed_flags(parser, args)
    from keras_transformer.benchmarks import speed  # noqa: PLC0415

    if args.steps_per_execution:
        speed.steps_per_execution_figures(("small", "base"), args.vocab_size, args.batch_tokens, args.length,
                                          args.train_steps, args.steps_per_execution)
        return 0
    measured = speed.run_benchmark(args.preset, args.vocab_size, args.batch_tokens, args.length, args.train_steps,
                                   args.decode_batch, args.output_length, args.corpus, args.skip_training,
                                   args.engines_batch)
    record(args, argv, "speed", "float32 and mixed_bfloat16", {**synthetic_corpus(args), "padding_corpus": args.corpus},
           {"preset": args.preset, **measured})
    return 0


def run(parser, args, argv=None):
    """The package's modes: serving, constrained search, or training and search speed."""
    if args.serving is not None:
        return _serving_main(parser, args, argv)
    if args.constrained is not None:
        return _constrained_main(parser, args, argv)
    return _speed_main(parser, args, argv)


def benchmark_main(argv=None):
    """`kt-benchmark`: the package's modes. The modes that drive eole or child
    processes live in the repository's benchmarks/ folder, which
    `scripts/benchmark.py` runs (`benchmarks.main`)."""
    parser_ = parser()
    args = parser_.parse_args(argv)
    for name in LAB_FLAGS:
        if getattr(args, name):
            parser_.error(f"--{name.replace('_', '-')} drives another toolkit or child processes from the "
                          "repository's benchmarks/ folder, which is not installed: run python scripts/benchmark.py "
                          "in a clone.")
    return run(parser_, args, argv)
