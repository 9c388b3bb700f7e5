"""The main job, end to end: `python scripts/train.py` with its defaults."""

import os
import re
import subprocess
import sys
import time

import pytest
import tensorflow as tf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
def test_default_run_trains_scores_exports_and_shows_examples(tmp_path):
    """The README's main job (only its output folders moved to tmp_path) reaches
    sacreBLEU >= 90 on the built-in test split, and its export serves."""
    model_dir, export_dir = str(tmp_path / "run"), str(tmp_path / "saved_models" / "numerals_en_de")
    start = time.time()
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "train.py"), "--model-dir", model_dir, "--export-dir", export_dir],
        capture_output=True, text=True, timeout=3600, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )
    minutes = (time.time() - start) / 60
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    print(result.stdout[-2500:])
    print(f"main job took {minutes:.1f} minutes")
    bleu = float(re.search(r"^sacreBLEU (\d+\.\d+)  \(nrefs:1\|", result.stdout, re.M).group(1))
    assert bleu >= 90.0
    assert re.search(r"^chrF      \d+\.\d+", result.stdout, re.M)
    assert "tokens_per_sec" in result.stdout and "sec_per_step" in result.stdout  # progress is visible
    assert result.stdout.count("  reference: ") >= 3  # examples next to their references
    served = tf.saved_model.load(os.path.join(export_dir, "1")).signatures["serving_default"]
    out = served(sentences=tf.constant(["It is half past seven."]))
    assert out["translations"].numpy()[0].decode() == "Es ist halb acht."
