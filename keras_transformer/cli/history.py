"""`scripts/plot_history.py`."""

import sys

from keras_transformer.cli.common import make_parser


def plot_history_main(argv=None):
    parser = make_parser(
        "plot_history.py",
        "Plot a run's validation sacreBLEU and chrF (logged after every checkpoint interval) against "
        "training minutes and optimizer updates, as a PNG; also print them as a table.",
    )
    parser.add_argument("--model-dir", required=True, help="The training model directory.")
    parser.add_argument("--output", default="history.png", help="The PNG file to write.")
    parser.add_argument("--title", default=None, help="The figure's title (default: names the model directory).")
    args = parser.parse_args(argv)
    from keras_transformer.plots import history as history_plot  # noqa: PLC0415

    try:
        curve = history_plot.read_curve(args.model_dir)
        history_plot.plot_history(args.model_dir, args.output, args.title)
    except FileNotFoundError as error:
        print(f"plot_history.py: error: {error}", file=sys.stderr)
        return 1
    print("updates  minutes  val_bleu  val_chrf")
    for updates, minutes, bleu, chrf in curve:
        print(f"{updates:7d}  {minutes:7.1f}  {bleu:8.2f}  {chrf:8.2f}")
    print(args.output)
    return 0
