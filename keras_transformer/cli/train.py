"""`scripts/train.py`: its flags are the fields of `RunConfig`."""

import argparse
import dataclasses
import os
import sys
import types
import typing

from keras_transformer import config as run_config
from keras_transformer.cli.common import make_parser
from keras_transformer.modeling import presets
from keras_transformer.modeling.precision import PRECISIONS


# With --init-from these come from the run it names; a flag left out is absent from the parsed args.
_INHERITED = run_config.INHERITED_BY_INIT_FROM
_CHOICES = {"preset": sorted(presets.PRESETS), "strategy": run_config.STRATEGIES,
            "precision": PRECISIONS}


def _flag(name):
    return "--" + name.replace("_", "-")


def flag_type(annotation):
    """The argparse type of a dataclass field's annotation: `int`, `float`,
    `str`, `bool`, or one of them `| None` (the flag then parses the inner
    type; None stays the default)."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        inner = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"Cannot make a flag of the annotation {annotation!r}.")
        annotation = inner[0]
    if annotation not in (int, float, str, bool):
        raise TypeError(f"Cannot make a flag of the annotation {annotation!r}; expected int, float, str or bool.")
    return annotation


def add_dataclass_flags(parser, cls, choices=None, suppressed=()):
    """One flag per field of the dataclass `cls`, `--field-name`, typed by its
    annotation (`flag_type`), with the field's metadata "help" as its help.
    A bool field gets `--name` and `--no-name`, so a default of True can be
    turned off. Fields in `suppressed` are absent from the parsed args unless given."""
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        kind = flag_type(hints[field.name])
        help_text = field.metadata.get("help", "")
        default = argparse.SUPPRESS if field.name in suppressed else field.default
        if field.name in suppressed:
            help_text += (" (with --init-from, the run's)" if field.default is None else
                          f" (default: {field.default}; with --init-from, the run's)")
        if kind is bool:
            parser.add_argument(_flag(field.name), action=argparse.BooleanOptionalAction, default=default,
                                help=help_text)
            continue
        parser.add_argument(_flag(field.name), type=kind, help=help_text, default=default,
                            choices=(choices or {}).get(field.name))


def _train_parser():
    parser = make_parser(
        "train.py",
        "Train a Transformer (resuming from its backup if one exists), score the test split "
        "with sacreBLEU and export a SavedModel. With no flags: the main job, the small preset for 800 updates "
        "on the built-in corpus. With --dataset of your own and neither --time-budget nor --steps, the recipe "
        "chooses vocabulary, model, batch and dropout from the corpus and trains until validation BLEU stops "
        "improving, printing a 'recipe:' block (keras_transformer/training/open_ended.py).",
    )
    add_dataclass_flags(parser, run_config.RunConfig, _CHOICES, suppressed=_INHERITED)
    parser.add_argument("--record", default=None, metavar="DIR",
                        help="Also write the run's record (command, commit, machine, precision, corpus, dev and "
                        "test scores, updates, minutes), which it always writes into its run folder as "
                        "record.json, into DIR as a new file: results/ holds those the docs cite.")
    parser.add_argument("--inspect-data", action="store_true",
                        help="Print what the data pipeline makes of --dataset (pairs, skips, batches, "
                        "padding efficiency) and exit without training. On a corpus of your own its vocabulary is "
                        "the size the recipe would choose (unless --vocab-size), kept in the run folder for the "
                        "training command that follows.")
    return parser


def given_flags(argv):
    """The settings named by the flags in `argv` (`--vocab-size 8000` and
    `--vocab-size=8000` give "vocab_size", `--no-norm-first` "norm_first"):
    what a time-budgeted run's recipe leaves as the user set it."""
    names = {token[2:].split("=")[0].replace("-", "_") for token in argv if token.startswith("--")}
    return names | {name[3:] for name in names if name.startswith("no_")}


def train_main(argv=None):
    parser = _train_parser()
    argv_given = argv is not None
    argv = sys.argv[1:] if argv is None else list(argv)
    args = vars(parser.parse_args(argv))
    inspect, record_dir = args.pop("inspect_data"), args.pop("record")
    given = {name for name in _INHERITED if name in args}
    defaults = {field.name: field.default for field in dataclasses.fields(run_config.RunConfig)}
    args.update({name: defaults[name] for name in _INHERITED if name not in given})
    try:
        if args["init_from"]:
            from keras_transformer.training import fine_tuning  # noqa: PLC0415

            args = fine_tuning.inherit(args, args["init_from"], given)
        config = run_config.RunConfig(**args)
    except (ValueError, FileNotFoundError) as error:
        parser.error(str(error))
    from keras_transformer.run_dir import RunDir  # noqa: PLC0415
    from keras_transformer.training import budget, open_ended, recipe  # noqa: PLC0415

    try:
        if inspect:
            return _inspect(config, argv)
        # Called as the program (no argv), a time budget counts from the process's start.
        started = None if argv_given else budget.process_start()
        given = given_flags(argv)
        if open_ended.applies(config, given):  # a corpus of one's own, no end given: no toy defaults
            config = recipe.with_default_folders(config)
            config = recipe.plan_open_ended(config, RunDir(config.model_dir), given)
        outcome = recipe.train_and_evaluate(config, fixed=given, started=started)
        if outcome.test is not None:  # the chief's
            from keras_transformer.cli import records  # noqa: PLC0415

            record = run_record(outcome, records.command_line("train.py", argv))
            RunDir(outcome.config.model_dir).write_record(record)
            if record_dir:
                print(f"Record written to {records.write(record_dir, record)}")
    except (FileNotFoundError, ValueError) as error:
        print(f"train.py: error: {error}", file=sys.stderr)
        return 1
    return 0


def _inspect(config, argv):
    """--inspect-data: prints what the run would train on, with the vocabulary it would use; records no run."""
    from keras_transformer.data.summary import format_summary, summarize  # noqa: PLC0415
    from keras_transformer.run_dir import RunDir  # noqa: PLC0415
    from keras_transformer.training import recipe, vocabulary  # noqa: PLC0415

    config = recipe.with_default_folders(config)
    run_dir = RunDir(config.model_dir)
    if run_dir.has_config():  # a recorded run: its own vocabulary, never trained over
        config = dataclasses.replace(config, vocab_size=run_dir.load_config().vocab_size)
    elif (config.dataset != run_config.RunConfig().dataset and not config.init_from
          and "vocab_size" not in given_flags(argv)):
        config = dataclasses.replace(config, vocab_size=recipe.corpus_vocabulary(config))
    os.makedirs(run_dir.path, exist_ok=True)
    # The vocabulary it trains is kept for training, which records the run (not this command).
    tokenizer = vocabulary.load_tokenizer(config.data, run_dir, config.init_from)
    print(format_summary(summarize(config.data, tokenizer)))
    return 0


def run_record(outcome, command):
    """The record (`cli.records`) of a finished `train.py` run, from its `recipe.Outcome`."""
    from keras_transformer.cli import records  # noqa: PLC0415

    config, choice, test = outcome.config, outcome.choice, outcome.test
    dev = choice.alpha_scores[f"{choice.alpha:g}"] if choice.alpha is not None else choice.scores[choice.chosen]
    corpus = {"dataset": config.dataset, "test": config.test, "validation_sentences": choice.validation_sentences,
              "test_sentences": test.sentences}
    figures = {"preset": config.preset, "layers": presets.run_depths(config), "vocab_size": config.vocab_size,
               "time_budget": config.time_budget,
               "steps": None if config.time_budget else config.steps, "updates": outcome.updates,
               "model": choice.chosen, "alpha": config.alpha, "train_minutes": outcome.train_seconds / 60.0,
               "total_minutes": outcome.total_seconds / 60.0}
    return records.make("train", command, config.precision, corpus, figures,
                        dev={**dev, "sentences": choice.validation_sentences},
                        test={"bleu": test.bleu, "chrf": test.chrf, "exact_match": test.exact_match,
                              "sentences": test.sentences, "bleu_signature": test.bleu_signature})
