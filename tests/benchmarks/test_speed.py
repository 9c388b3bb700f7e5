"""The speed benchmark's steps_per_execution section, on the tiny preset (its figures are the script's, not a test's)."""

import re

import pytest

from keras_transformer.benchmarks import speed


@pytest.mark.slow
def test_steps_per_execution_reports_both_rates_and_their_ratio():
    lines = []
    figures = speed.steps_per_execution_figures(("tiny",), vocab_size=300, batch_tokens=256, length=16, steps=3,
                                                steps_per_execution=3, precision="float32", report=lines.append)
    (line,) = lines
    match = re.fullmatch(r"8\. fit tiny +float32: +(\d+) target tokens/s at 1 update per execution, +(\d+) at 3: "
                         r"(\d+\.\d{3})x", line)
    assert match, line
    one, three, ratio = float(match.group(1)), float(match.group(2)), float(match.group(3))
    assert figures["tiny_spe_ratio"] == pytest.approx(float(ratio), abs=5e-4)
    assert ratio == pytest.approx(three / one, abs=0.01)
