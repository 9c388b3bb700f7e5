"""oneDNN off against on: the scripts' default, the child processes, and the section's ratios."""

import glob
import os
import subprocess
import sys

import pytest

from benchmarks import onednn

def test_importing_the_package_leaves_the_environment_as_it_was():
    """A library does not choose TensorFlow's kernels for its importer."""
    env = {k: v for k, v in os.environ.items() if k != onednn.ENV}
    code = f"import os, keras_transformer; print(os.environ.get({onednn.ENV!r}))"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "None"


def test_every_script_turns_onednn_on_before_tensorflow_loads_and_keeps_a_value_the_user_set():
    """scripts/*.py set TF_ENABLE_ONEDNN_OPTS=1 unless it is set, as the
    package's figures were measured; each runs here with --help."""
    scripts = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "*.py")))
    code = ("import os, runpy, sys\n"
            f"for script in {scripts!r}:\n"
            f"    os.environ.pop({onednn.ENV!r}, None)\n"
            "    if script.endswith('make_reference.py'):\n"
            f"        os.environ[{onednn.ENV!r}] = '0'  # a value the user set stays\n"
            "    sys.argv = [script, '--help']\n"
            "    try:\n"
            "        runpy.run_path(script, run_name='__main__')\n"
            "    except SystemExit:\n"
            "        pass\n"
            f"    print('SETTING', os.path.basename(script), os.environ.get({onednn.ENV!r}))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={k: v for k, v in os.environ.items() if k != onednn.ENV})
    settings = dict(line.split()[1:] for line in done.stdout.splitlines() if line.startswith("SETTING "))
    assert len(settings) == len(scripts) >= 12
    assert {name: value for name, value in settings.items() if value != "1"} == {"make_reference.py": "0"}


@pytest.mark.slow
@pytest.mark.parametrize("setting", onednn.SETTINGS)
def test_a_child_runs_with_its_setting_and_measures_both_rates(setting):
    figures = onednn.measure_in_child(setting, "tiny", 300, 256, 8, 2, 2, 5)
    assert figures["onednn"] is (setting == "1")
    assert figures["train_tokens_per_sec"] > 0 and figures["decode_sentences_per_sec"] > 0


def test_the_settings_take_turns_each_keeps_its_best_and_the_ratios_are_on_over_off():
    rates = {"0": [(100.0, 2.0), (120.0, 1.5)], "1": [(150.0, 2.5), (130.0, 3.0)]}
    calls, lines = [], []

    def measure(setting, *shape):
        calls.append((setting, shape))
        train, decode = rates[setting][sum(1 for s, _ in calls if s == setting) - 1]
        return {"onednn": setting == "1", "train_tokens_per_sec": train, "decode_sentences_per_sec": decode}

    result = onednn.onednn_figures("small", 8000, 2048, 20, 10, 8, 40, rounds=2, measure=measure,
                                   report=lines.append)
    assert [s for s, _ in calls] == ["0", "1", "0", "1"]
    assert {shape for _, shape in calls} == {("small", 8000, 2048, 20, 10, 8, 40)}
    assert result["off"]["train_tokens_per_sec"] == 120.0 and result["on"]["train_tokens_per_sec"] == 150.0
    assert result["off"]["decode_sentences_per_sec"] == 2.0 and result["on"]["decode_sentences_per_sec"] == 3.0
    assert result["train_ratio"] == pytest.approx(1.25) and result["decode_ratio"] == pytest.approx(1.5)
    assert lines == ["9. oneDNN, small float32, best of 2 fresh processes each: fit 120 target tokens/s off, "
                     "150 on: 1.250x; beam search 2.00 sentences/s off, 3.00 on: 1.500x"]


def test_a_child_whose_setting_did_not_take_is_an_error():
    def measure(setting, *shape):
        return {"onednn": True, "train_tokens_per_sec": 1.0, "decode_sentences_per_sec": 1.0}

    with pytest.raises(RuntimeError, match="TF_ENABLE_ONEDNN_OPTS=0 left oneDNN on"):
        onednn.onednn_figures("tiny", 300, 256, 8, 2, 2, 5, rounds=1, measure=measure, report=lambda line: None)
    with pytest.raises(ValueError, match="rounds must be at least 1; got 0"):
        onednn.onednn_figures("tiny", 300, 256, 8, 2, 2, 5, rounds=0, measure=measure)


def test_the_flag_runs_only_this_comparison_with_the_shape_flags(monkeypatch):
    from keras_transformer.benchmarks import speed
    from benchmarks.main import benchmark_main

    called = []
    monkeypatch.setattr(onednn, "onednn_figures", lambda *args: called.append(args) or {})
    monkeypatch.setattr(speed, "run_benchmark", lambda *args: pytest.fail("the other figures ran"))
    assert benchmark_main(["--onednn", "--preset", "small", "--vocab-size", "8000", "--batch-tokens", "2048",
                           "--length", "20", "--train-steps", "10", "--decode-batch", "8",
                           "--output-length", "40"]) == 0
    assert called == [("small", 8000, 2048, 20, 10, 8, 40)]


def test_the_installed_command_refuses_the_labs_modes_by_name(capsys):
    """`kt-benchmark` is the package's: --onednn, --peer-eole and --streaming-pairs need the repository's
    benchmarks/ folder, and it says so rather than failing on an import."""
    from keras_transformer import cli
    from tests.conftest import run_entry_point

    for argv in (["--onednn"], ["--peer-eole", "eole"], ["--streaming-pairs", "300"]):
        code, _, err = run_entry_point(cli.benchmark_main, argv, capsys)
        flag = argv[0]
        assert code == 2 and f"{flag} drives another toolkit or child processes" in err, err
        assert "run python scripts/benchmark.py in a clone" in err
