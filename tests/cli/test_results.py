"""The docs' tables of figures are built from the records in results/ (`cli.results`)."""

import os

from tests.conftest import ROOT

MACHINE = {"cpu": "Intel(R) Xeon(R) Processor", "family": 6, "model": 143, "flags": ["avx512_bf16", "amx_bf16"],
           "threads": 2, "gpus": []}


def train_record(test_bleu, dev_bleu, date):
    return {"kind": "train", "command": "python scripts/train.py --dataset lo.tsv --time-budget 25",
            "version": "0.4.0", "commit": "abc", "date": date, "machine": MACHINE, "precision": "mixed_bfloat16",
            "corpus": {"dataset": "runs/lo.tsv", "test": "lo.test.tsv"},
            "dev": {"bleu": dev_bleu, "chrf": 50.0, "exact_match": 1.0, "sentences": 200},
            "test": {"bleu": test_bleu, "chrf": 47.2, "exact_match": 2.5, "sentences": 2000},
            "figures": {"preset": "small", "vocab_size": 8000, "time_budget": "25", "steps": None, "updates": 2492,
                        "model": "average", "alpha": 1.0, "train_minutes": 20.0, "total_minutes": 24.7}}


def test_a_training_record_is_a_row_naming_its_cpu_precision_and_command():
    from keras_transformer.cli import results

    table = results.readme_table([train_record(21.9, 33.23, "2026-12-06T10:00:00Z")]).splitlines()
    assert table[2] == (
        "| Training on lo.tsv: 25-minute budget | test sacreBLEU 21.90, chrF 47.20, exact match 2.5% (2,000); "
        "dev sacreBLEU 33.23, chrF 50.00, exact match 1.0% (200); 2,492 updates, 24.7 minutes in all (average "
        "checkpoint, alpha 1) | Intel(R) Xeon(R) Processor (family 6, model 143; avx512_bf16 amx_bf16), 2 threads "
        "| mixed_bfloat16 | `python scripts/train.py --dataset lo.tsv --time-budget 25` |")


def test_repeated_runs_of_one_command_show_their_spread_dev_and_test_apart():
    from keras_transformer.cli import results

    page = results.page([train_record(21.9, 33.2, "2026-12-06T10:00:00Z"),
                         train_record(21.67, 32.58, "2026-12-06T11:00:00Z")])
    assert "Spread: test sacreBLEU 21.67–21.90 over 2 runs; dev sacreBLEU 32.58–33.20 over 2 runs." in page
    single = results.page([train_record(21.9, 33.2, "2026-12-06T10:00:00Z")])
    assert "Spread" not in single


def test_the_readme_has_a_row_per_command_with_its_spread_and_other_depths_only_on_the_page():
    from keras_transformer.cli import results

    first, second = train_record(21.9, 33.2, "2026-12-06T10:00:00Z"), train_record(21.67, 32.58, "2026-12-06T11:00:00Z")
    shallow = train_record(15.87, 25.65, "2026-12-06T12:00:00Z")
    shallow["command"] += " --encoder-layers 6 --decoder-layers 1"
    shallow["figures"]["layers"] = [6, 1]
    second["figures"]["layers"] = [3, 3]  # the small preset's own depths, named
    rows = results.readme_table([first, second, shallow]).splitlines()[2:]
    assert len(rows) == 1 and "test sacreBLEU 21.67" in rows[0]  # the latest run's figures
    assert "spread: test sacreBLEU 21.67–21.90 over 2 runs; dev sacreBLEU 32.58–33.20 over 2 runs" in rows[0]
    page = results.page([first, second, shallow])
    assert "| Training on lo.tsv: 25-minute budget, 6+1 layers | test sacreBLEU 15.87" in page


def test_the_readme_row_of_a_command_run_on_two_machines_is_the_latest_ones_with_that_machines_spread():
    from keras_transformer.cli import results

    xeon_a = train_record(21.9, 33.2, "2026-12-06T10:00:00Z")
    xeon_b = train_record(21.67, 32.58, "2026-12-06T11:00:00Z")
    amd = train_record(24.43, 34.8, "2026-12-07T10:00:00Z")
    amd["machine"] = {**MACHINE, "cpu": "AMD EPYC", "family": 26, "model": 2, "flags": ["avx512_bf16"]}
    rows = results.readme_table([xeon_a, xeon_b, amd]).splitlines()[2:]  # oldest first, as read_all gives them
    assert len(rows) == 1 and "test sacreBLEU 24.43" in rows[0] and "AMD EPYC (family 26" in rows[0]
    assert "spread" not in rows[0]  # the Xeon's two runs are not the AMD's spread
    xeon_c = train_record(21.0, 31.0, "2026-12-08T10:00:00Z")
    rows = results.readme_table([xeon_a, xeon_b, amd, xeon_c]).splitlines()[2:]
    assert len(rows) == 1 and "test sacreBLEU 21.00" in rows[0]  # the Xeon's again, with its three runs' spread
    assert "spread: test sacreBLEU 21.00–21.90 over 3 runs" in rows[0]
    page = results.page([xeon_a, xeon_b, amd])
    assert "24.43" in page and "Spread: test sacreBLEU 21.67–21.90 over 2 runs" in page


def test_budgeted_runs_are_tabled_by_corpus_with_a_row_per_setting_the_recipes_own_first():
    from keras_transformer.cli import results

    first, second = train_record(21.9, 33.2, "2026-12-06T10:00:00Z"), train_record(21.67, 32.58, "2026-12-06T11:00:00Z")
    second["figures"]["updates"] = 2100
    dropout = train_record(20.5, 31.0, "2026-12-06T12:00:00Z")
    dropout["command"] = "python scripts/train.py --dataset lo.tsv --dropout 0 --time-budget=25 --record results"
    amd = train_record(24.43, 34.8, "2026-12-07T10:00:00Z")
    amd["machine"] = {**MACHINE, "cpu": "AMD EPYC", "family": 26, "model": 2, "flags": ["avx512_bf16"]}
    unbudgeted = train_record(99.6, 99.7, "2026-12-07T11:00:00Z")
    unbudgeted["figures"].update(time_budget=None, steps=800)
    lines = results.by_shape([dropout, first, amd, second, unbudgeted])
    xeon = lines.index("### lo.tsv at 25 minutes")
    assert lines[xeon + 2].startswith("Intel(R) Xeon(R) Processor (family 6")
    assert lines[xeon + 6:xeon + 8] == ["| the recipe's choices | 2 | 32.58–33.20 | 21.67–21.90 | 2,100–2,492 |",
                                        "| `--dropout 0` | 1 | 31.00 | 20.50 | 2,492 |"]
    other = lines.index("### lo.tsv at 25 minutes", xeon + 1)  # another machine: a table of its own
    assert lines[other + 2].startswith("AMD EPYC") and lines[other + 6] == \
        "| the recipe's choices | 1 | 34.80 | 24.43 | 2,492 |"
    assert lines.count("### lo.tsv at 25 minutes") == 2 and not any("99.60" in line for line in lines)
    assert "## Budgeted training by corpus" in results.page([first])
    assert "## Budgeted training by corpus" not in results.page([unbudgeted])


def test_runs_apart_only_in_their_folder_are_one_command_and_settings_tried_stay_off_the_readme():
    from keras_transformer.cli import results

    first, second = train_record(21.9, 33.2, "2026-12-06T10:00:00Z"), train_record(21.67, 32.58, "2026-12-06T11:00:00Z")
    second["command"] = "python scripts/train.py --dataset lo.tsv --model-dir runs/lo-b --time-budget 25"
    tried = train_record(20.5, 31.0, "2026-12-06T12:00:00Z")
    tried["command"] = "python scripts/train.py --dataset lo.tsv --time-budget 25 --dropout 0"
    rows = results.readme_table([first, second, tried]).splitlines()[2:]
    assert len(rows) == 1 and "spread: test sacreBLEU 21.67–21.90 over 2 runs" in rows[0]
    assert rows[0].endswith("| `python scripts/train.py --dataset lo.tsv --time-budget 25` |")
    page = results.page([first, second, tried])
    assert "runs/lo-b" not in page and "Spread: test sacreBLEU 21.67–21.90 over 2 runs" in page
    assert "`python scripts/train.py --dataset lo.tsv --time-budget 25 --dropout 0`" in page
    evaluated = {**first, "kind": "evaluate", "command": "python scripts/evaluate.py --model-dir runs/lo-b --record r",
                 "corpus": {"dataset": "lo.tsv", "model_dir": "runs/lo-b", "split": "test", "sentences": 2000}}
    assert results.shown_command(evaluated) == evaluated["command"]  # there it names the model measured
    steps = train_record(99.6, 99.7, "2026-12-06T13:00:00Z")  # no budget: no recipe to try a setting against
    steps["command"] = "python scripts/train.py --steps 800 --record results"
    steps["figures"].update(time_budget=None, steps=800)
    assert len(results.readme_table([first, second, tried, steps]).splitlines()[2:]) == 2


def test_the_table_goes_between_the_readmes_markers_and_nowhere_else():
    import pytest

    from keras_transformer.cli import results

    readme = f"# x\n\n{results.BEGIN}\nold\nrows\n{results.END}\n\nafter\n"
    assert results.with_table(readme, "| new |\n") == f"# x\n\n{results.BEGIN}\n| new |\n{results.END}\n\nafter\n"
    with pytest.raises(ValueError, match="no <!-- results -->"):
        results.with_table("# x\n", "| new |\n")


def test_check_fails_on_a_stale_page_and_passes_once_built(tmp_path, monkeypatch, capsys):
    from keras_transformer.cli import records, results

    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(f"# x\n{results.BEGIN}\n{results.END}\n")
    records.write(tmp_path / "results", train_record(21.9, 33.2, "2026-12-06T10:00:00Z"))
    monkeypatch.chdir(tmp_path)
    assert results.results_main(["--check"]) == 1
    assert "README.md, docs/results.md differ" in capsys.readouterr().err
    assert results.results_main([]) == 0
    assert results.results_main(["--check"]) == 0
    assert "| Training on lo.tsv: 25-minute budget |" in (tmp_path / "README.md").read_text()


def test_the_readme_and_the_results_page_are_what_the_records_make():
    """Every figure table in the README and docs/results.md is built from results/: a figure edited by hand,
    or a record added without rebuilding, fails here."""
    from keras_transformer.cli import results

    for path, text in results.built(ROOT, os.path.join(ROOT, "results")).items():
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            assert f.read() == text, f"{path} differs from what results/ makes: python scripts/make_results.py"
