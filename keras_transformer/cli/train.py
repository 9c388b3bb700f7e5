"""`scripts/train.py`: its flags are the fields of `RunConfig`."""

import argparse
import dataclasses
import sys

from keras_transformer import config as run_config
from keras_transformer import presets
from keras_transformer.cli.common import make_parser


# With --init-from these come from the run it names; a flag left out is absent from the parsed args.
_INHERITED = run_config.INHERITED_BY_INIT_FROM
_CHOICES = {"preset": sorted(presets.PRESETS), "strategy": run_config.STRATEGIES,
            "precision": run_config.PRECISIONS}


def _flag(name):
    return "--" + name.replace("_", "-")


def _train_parser():
    parser = make_parser(
        "train.py",
        "Train a Transformer (resuming from its backup if one exists), score the test split "
        "with sacreBLEU and export a SavedModel. With no flags: the small preset on the built-in corpus.",
    )
    for field in dataclasses.fields(run_config.RunConfig):
        help_text = field.metadata.get("help", "")
        if field.type is bool or field.type == "bool":
            parser.add_argument(_flag(field.name), action="store_true", help=help_text)
            continue
        kind = {"int": int, "float": float, "float | None": float}.get(str(field.type), None) or (
            field.type if field.type in (int, float) else str
        )
        if field.name in _INHERITED:
            help_text += f" (default: {field.default}; with --init-from, the run's)"
        parser.add_argument(_flag(field.name), type=kind, help=help_text, choices=_CHOICES.get(field.name),
                            default=argparse.SUPPRESS if field.name in _INHERITED else field.default)
    parser.add_argument("--inspect-data", action="store_true",
                        help="Print what the data pipeline makes of --dataset (pairs, skips, batches, "
                        "padding efficiency) and exit without training.")
    return parser


def train_main(argv=None):
    parser = _train_parser()
    args = vars(parser.parse_args(argv))
    inspect = args.pop("inspect_data")
    given = {name for name in _INHERITED if name in args}
    defaults = {field.name: field.default for field in dataclasses.fields(run_config.RunConfig)}
    args.update({name: defaults[name] for name in _INHERITED if name not in given})
    try:
        if args["init_from"]:
            from keras_transformer import fine_tuning  # noqa: PLC0415

            args = fine_tuning.inherit(args, args["init_from"], given)
        config = run_config.RunConfig(**args)
    except (ValueError, FileNotFoundError) as error:
        parser.error(str(error))
    from keras_transformer import main_job, training  # noqa: PLC0415  (TensorFlow loads only after parsing)

    try:
        if inspect:
            from keras_transformer.data.inspect import format_summary, inspect_data  # noqa: PLC0415

            training.prepare_model_dir(config)  # the vocabulary it trains is kept for training
            print(format_summary(inspect_data(config, training.load_tokenizer(config))))
            return 0
        main_job.train_and_evaluate(config)
    except (FileNotFoundError, ValueError) as error:
        print(f"train.py: error: {error}", file=sys.stderr)
        return 1
    return 0
