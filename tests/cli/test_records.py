"""Records (`cli.records`): what a measuring command writes, and that it reads back exactly."""

import json
import subprocess

import pytest

from tests.conftest import ROOT, run_entry_point

XEON = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8488C
flags\t\t: fpu sse avx2 avx512f avx512_bf16 amx_bf16 amx_tile

processor\t: 1
model name\t: another
"""
EPYC_AVX2 = """processor\t: 0
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC 7R13 Processor
flags\t\t: fpu sse avx2
"""


def test_the_cpu_is_named_by_its_first_processors_model_family_and_kernel_flags():
    from keras_transformer.cli import records

    assert records.cpu_info(XEON) == {"cpu": "Intel(R) Xeon(R) Platinum 8488C", "family": 6, "model": 143,
                                      "flags": ["avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"]}
    # Family 25 with AVX2 only and family 25 with AVX-512 bf16 are told apart by their flags.
    assert records.cpu_info(EPYC_AVX2) == {"cpu": "AMD EPYC 7R13 Processor", "family": 25, "model": 1,
                                           "flags": ["avx2"]}


def test_a_record_names_the_checkouts_commit_and_never_overwrites_another(tmp_path):
    from keras_transformer.cli import records

    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    record = records.make("speed", "python scripts/benchmark.py", "float32", {"dataset": "synthetic"}, {"x": 1.5})
    assert record["commit"].removesuffix("-dirty") == head
    assert record["machine"]["threads"] >= 1 and record["machine"]["cpu"] == records.cpu_info()["cpu"]
    first, second = records.write(tmp_path, record), records.write(tmp_path, record)
    assert first != second  # the same second twice: two files
    found = records.read_all(tmp_path)
    assert [r.pop("file") for r in found] == sorted([first.split("/")[-1], second.split("/")[-1]])
    assert found == [record, record]  # exact round trip
    with pytest.raises(ValueError, match="kind is one of"):
        records.make("guess", "c", "float32", {}, {})
    (tmp_path / "notes.json").write_text(json.dumps({"kind": "diary"}))
    with pytest.raises(ValueError, match="notes.json is not a record"):
        records.read_all(tmp_path)


def test_evaluate_writes_the_scores_it_prints_under_the_splits_name(tiny_run_dir, tmp_path, capsys):
    from keras_transformer import cli
    from keras_transformer.run_dir import RunDir

    argv = ["--model-dir", tiny_run_dir, "--split", "test", "--limit", "5", "--record", str(tmp_path / "r"),
            "--output", str(tmp_path / "h.txt")]
    code, out, err = run_entry_point(cli.evaluate_main, argv, capsys)
    assert code == 0, err
    (path,) = (tmp_path / "r").iterdir()
    record = json.loads(path.read_text())
    assert f"Record written to {path}" in out
    assert record["kind"] == "evaluate" and "dev" not in record
    assert f"sacreBLEU {record['test']['bleu']:.2f}  ({record['test']['bleu_signature']})" in out
    assert record["corpus"]["split"] == "test" and record["corpus"]["sentences"] == 5
    assert record["corpus"]["from_run"] and record["test"]["sentences"] == 5  # the run's own split
    assert record["precision"] == RunDir(tiny_run_dir).load_config().precision
    assert record["command"].startswith("python scripts/evaluate.py --model-dir ") and "--limit 5" in record["command"]
    assert record["figures"]["beam_size"] == 4
