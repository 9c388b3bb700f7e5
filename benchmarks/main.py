"""`scripts/benchmark.py`: the package's benchmark modes (`keras_transformer.cli.benchmark`) and the lab's.

The lab's modes drive eole (`--peer-eole`) or child processes (`--onednn`,
`--streaming-pairs`); the flags are the package's parser's, so that
`--help` and docs/reference.md list every mode.
"""

import os
import shutil

from benchmarks import eole_peer
from keras_transformer.cli import benchmark
from keras_transformer.config import parse_minutes
from keras_transformer.run_dir import RunDir


def peer_main(parser, args, argv=None):
    """--peer-eole: this package against eole at the same budget."""
    if args.peer_ours is not None:
        for name in ("dataset", "test", "time_budget"):
            if getattr(args, name, None) is not None:
                parser.error(f"--peer-ours takes the run's own --{name.replace('_', '-')}; leave "
                             f"--{name.replace('_', '-')} out.")
        if not os.path.isdir(args.peer_ours):
            parser.error(f"--peer-ours {args.peer_ours!r} is not a folder.")
    else:
        for name in ("dataset", "test"):
            if not getattr(args, name):
                parser.error(f"--peer-eole needs --{name}.")
            if not os.path.exists(getattr(args, name)):
                parser.error(f"--{name} {getattr(args, name)!r} does not exist.")
    try:
        rates = peer_rates(args.peer_rates)
    except ValueError as error:
        parser.error(str(error))
    eole = shutil.which(args.peer_eole)
    if eole is None:
        parser.error(f"--peer-eole {args.peer_eole!r} is not an executable eole command; install it with "
                     "`python -m venv eole-venv && eole-venv/bin/pip install torch==2.13.0 eole==0.6.4 aiohttp`.")
    if args.peer_ours is None:
        args.time_budget = getattr(args, "time_budget", "25")
        try:
            parse_minutes(args.time_budget)
        except ValueError as error:
            parser.error(str(error))
    try:
        mine, peer = eole_peer.compare(args.dataset, args.test, getattr(args, "time_budget", None),
                                       os.path.abspath(eole), args.peer_dir, rates, args.peer_ours)
    except (FileNotFoundError, ValueError) as error:
        parser.exit(1, f"benchmark.py: error: {error}\n")
    config = RunDir(args.peer_ours or os.path.join(args.peer_dir, "ours")).load_config()
    sides = {side: {"bleu": result.scores["bleu"], "chrf": result.scores["chrf"], "updates": result.updates}
             for side, result in (("ours", mine), ("eole", peer))}
    benchmark.record(args, argv, "eole", config.precision, {"dataset": config.dataset, "test": config.test},
                     {"time_budget": config.time_budget, "preset": config.preset, **sides})
    return 0


def peer_rates(text):
    """--peer-rates as a tuple of positive, distinct factors; ValueError naming the value otherwise."""
    try:
        rates = tuple(float(part) for part in text.split(","))
    except ValueError:
        rates = ()
    if not rates or min(rates) <= 0 or len(set(rates)) < len(rates):
        raise ValueError(f"--peer-rates {text!r} must be distinct positive numbers separated by commas, e.g. "
                         "0.25,0.5,1.")
    return rates


def onednn_main(parser, args, argv=None):
    """--onednn: TensorFlow's oneDNN kernels off against on, each in fresh processes."""
    benchmark.check_speed_flags(parser, args)
    from benchmarks import onednn  # noqa: PLC0415

    measured = onednn.onednn_figures(args.preset, args.vocab_size, args.batch_tokens, args.length, args.train_steps,
                                     args.decode_batch, args.output_length)
    benchmark.record(args, argv, "onednn", "float32", benchmark.synthetic_corpus(args),
                     {"preset": args.preset, **measured})
    return 0


def benchmark_main(argv=None):
    parser = benchmark.parser()
    args = parser.parse_args(argv)
    if args.peer_eole is not None:
        return peer_main(parser, args, argv)
    if args.onednn:
        return onednn_main(parser, args, argv)
    code = benchmark.run(parser, args, argv)
    if args.streaming_pairs and args.serving is None and args.constrained is None:
        from benchmarks import streaming  # noqa: PLC0415

        streaming.streaming_figures(args.streaming_pairs)
    return code
