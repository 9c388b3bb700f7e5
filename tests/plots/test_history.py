"""`scripts/plot_history.py`: a run's validation scores as a table and a PNG."""

from keras_transformer import cli
from keras_transformer.run_dir import RunDir
from tests.conftest import run_entry_point


def test_the_table_and_the_picture_are_the_runs_scores(tmp_path, capsys):
    """Twelve intervals (the record's keys are strings, "10" before "2" as text): the table lists them in
    interval order with their figures, then the PNG it wrote."""
    run = RunDir(tmp_path / "run")
    scores = {str(i): {"updates": 100 * (i + 1), "seconds": 30.0 * (i + 1), "val_bleu": 10.0 + i,
                       "val_chrf": 40.5 + i} for i in range(12)}
    run.write_validation_state({"scores": scores, "best_epoch": 11})
    output = tmp_path / "plots" / "history.png"
    code, out, err = run_entry_point(cli.plot_history_main, ["--model-dir", run.path, "--output", str(output)],
                                     capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["updates", "minutes", "val_bleu", "val_chrf"] and lines[-1] == str(output)
    assert [line.split() for line in lines[1:-1]] == [
        [str(100 * (i + 1)), f"{0.5 * (i + 1):.1f}", f"{10.0 + i:.2f}", f"{40.5 + i:.2f}"] for i in range(12)]
    assert output.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_run_without_scores_is_named_and_exits_1(tmp_path, capsys):
    run = RunDir(tmp_path / "run")
    run.write_validation_state({"scores": {}, "best_epoch": None})
    code, _, err = run_entry_point(cli.plot_history_main, ["--model-dir", run.path], capsys)
    assert code == 1 and "holds no scores" in err and "--bleu-sentences above 0" in err
