"""Every `python scripts/...` command in the README parses with that script's
real argument parser, so renamed or removed flags cannot rot there."""

import argparse
import os
import re
import shlex

import pytest

from keras_transformer import cli
from keras_transformer.config import RunConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAINS = {"train": cli.train_main, "translate": cli.translate_main, "evaluate": cli.evaluate_main,
         "export": cli.export_main, "average_checkpoints": cli.average_main,
         "plot_attention": cli.plot_attention_main, "benchmark": cli.benchmark_main}


def readme_commands():
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            for part in line.split("|"):
                match = re.search(r"python scripts/(\w+)\.py(.*)", part)
                if match:
                    args = shlex.split(match.group(2).split(">")[0].split("&&")[0])
                    commands.append((match.group(1), args))
    return commands


class Parsed(Exception):
    pass


def test_the_readme_has_commands_for_every_script():
    assert {name for name, _ in readme_commands()} >= {"train", "translate", "evaluate", "export",
                                                       "average_checkpoints", "plot_attention", "benchmark"}


@pytest.mark.parametrize("name,args", readme_commands(), ids=lambda v: v if isinstance(v, str) else None)
def test_readme_command_parses(name, args, monkeypatch):
    original = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, argv=None, namespace=None):
        raise Parsed(original(self, argv, namespace))

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    with pytest.raises(Parsed) as parsed:
        MAINS[name](args)
    values = vars(parsed.value.args[0])
    if name == "train":
        values.pop("inspect_data")
        RunConfig(**values)  # raises on invalid values
