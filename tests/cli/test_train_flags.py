import argparse
import re
import dataclasses

import pytest

from keras_transformer.cli.train import _train_parser, add_dataclass_flags, flag_type


@dataclasses.dataclass(frozen=True)
class Settings:
    count: int | None = dataclasses.field(default=None, metadata={"help": "How many."})
    rate: float = 0.5
    name: str | None = None
    shuffle: bool = True
    fast: bool = False


def test_optional_fields_parse_as_their_inner_type_and_booleans_turn_both_ways():
    parser = argparse.ArgumentParser()
    add_dataclass_flags(parser, Settings)
    defaults = parser.parse_args([])
    assert (defaults.count, defaults.rate, defaults.name, defaults.shuffle, defaults.fast) == (None, 0.5, None, True,
                                                                                              False)
    given = parser.parse_args(["--count", "3", "--rate", "2", "--name", "x", "--no-shuffle", "--fast"])
    assert given.count == 3 and isinstance(given.count, int)
    assert given.rate == 2.0 and isinstance(given.rate, float)
    assert (given.name, given.shuffle, given.fast) == ("x", False, True)
    with pytest.raises(SystemExit):
        parser.parse_args(["--count", "three"])
    assert "How many." in parser.format_help()


def test_annotations_a_flag_cannot_express_are_refused():
    assert flag_type(int | None) is int
    with pytest.raises(TypeError, match=re.escape("int | str")):
        flag_type(int | str)
    with pytest.raises(TypeError, match="list"):
        flag_type(list)


def test_the_train_flags_keep_their_types():
    args = _train_parser().parse_args(["--dropout", "0.2", "--steps", "10", "--jit-compile"])
    assert args.dropout == 0.2 and args.steps == 10 and args.jit_compile is True
    assert _train_parser().parse_args(["--no-jit-compile"]).jit_compile is False
    assert _train_parser().parse_args([]).dropout is None


def test_the_flags_a_user_gave_are_what_the_recipe_keeps():
    from keras_transformer.cli.train import given_flags

    assert given_flags(["--dataset", "c.tsv", "--vocab-size", "8000", "--dropout=0.2", "--no-norm-first"]) == {
        "dataset", "vocab_size", "dropout", "no_norm_first", "norm_first"}  # --no-X gives X as much as --X does


def test_norm_placement_is_the_presets_unless_a_flag_turns_it_either_way():
    """--norm-first / --no-norm-first; neither leaves None (the preset's
    post-norm, or the recipe's choice). It fixes the weights, so a fine-tuning
    run takes it from its source run."""
    assert "norm_first" not in vars(_train_parser().parse_args([]))  # train_main fills in None, or the source run's
    assert _train_parser().parse_args(["--norm-first"]).norm_first is True
    assert _train_parser().parse_args(["--no-norm-first"]).norm_first is False
    action = next(a for a in _train_parser()._actions if a.dest == "norm_first")
    assert action.help.endswith("(with --init-from, the run's)")
