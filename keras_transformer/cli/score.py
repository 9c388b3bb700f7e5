"""`scripts/score.py`: the model's log-probability of given translations."""

import sys

from keras_transformer.cli.common import make_parser, precision_flag
from keras_transformer.config import PAPER_ALPHA


def read_pairs(path):
    """(sources, targets) from a `source<TAB>target` file; ValueError naming the first bad line."""
    sources, targets = [], []
    with open(path, encoding="utf-8", errors="replace") if path != "-" else sys.stdin as lines:
        for number, line in enumerate(lines, start=1):
            fields = line.rstrip("\n").rstrip("\r").split("\t")
            if len(fields) != 2:
                raise ValueError(f"{path}:{number}: expected source<TAB>target; got {len(fields)} field(s).")
            sources.append(fields[0])
            targets.append(fields[1])
    return sources, targets


def score_main(argv=None):
    parser = make_parser(
        "score.py",
        "Score given translations with a trained model (or an ensemble), teacher-forced as in training, "
        "for filtering noisy parallel data or reranking. Prints one TSV line per input pair: index (from "
        "0), log_prob (log P(target + EOS | source), summed), per_token (log_prob / pieces, EOS counted), "
        "normalized (log_prob / ((5 + pieces) / 6)^alpha: beam search's score), pieces. A header line "
        "names the columns.",
    )
    parser.add_argument("--model-dir", required=True, action="append",
                        help="A training model directory; repeat it to score with an ensemble of runs that "
                        "share one vocabulary (their probabilities averaged, as in fairseq).")
    parser.add_argument("--input", required=True, help="source<TAB>target pairs, one per line; - for stdin.")
    parser.add_argument("--alpha", type=float, default=None,
                        help="Length penalty exponent of the normalized column (default: the first run's, "
                        f"{PAPER_ALPHA} unless it set another).")
    parser.add_argument("--batch-size", type=int, default=64, help="Pairs per batch.")
    parser.add_argument("--weights", default=None,
                        help="A .weights.h5 file to use instead of the run's chosen model (one --model-dir only).")
    precision_flag(parser)
    args = parser.parse_args(argv)
    if args.batch_size < 1:
        parser.error(f"--batch-size must be at least 1; got {args.batch_size}.")
    if args.alpha is not None and args.alpha < 0:
        parser.error(f"--alpha must be non-negative; got {args.alpha}.")
    from keras_transformer.decoding import restore, scoring  # noqa: PLC0415

    try:
        sources, targets = read_pairs(args.input)
        config, models, tokenizer = restore.restore_ensemble(args.model_dir, args.weights, args.precision)
    except (FileNotFoundError, ValueError) as error:
        parser.exit(1, f"score.py: error: {error}\n")
    alpha = config.alpha if args.alpha is None else args.alpha
    scores = scoring.score_pairs(models[0] if len(models) == 1 else models, tokenizer, sources, targets, alpha,
                                 args.batch_size)
    print("index\tlog_prob\tper_token\tnormalized\tpieces")
    for i in range(len(sources)):
        print(f"{i}\t{scores['log_prob'][i]:.6f}\t{scores['per_token'][i]:.6f}\t{scores['normalized'][i]:.6f}\t"
              f"{scores['tokens'][i]}")
    return 0
