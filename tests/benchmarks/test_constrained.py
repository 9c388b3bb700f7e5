from keras_transformer.benchmarks import constrained


def test_reference_terms_are_the_two_longest_words_in_their_order():
    assert constrained.reference_terms("Klicken Sie auf Rückgängig, um die Formatierung zu entfernen.") == [
        "Rückgängig", "Formatierung"]
    assert constrained.reference_terms("Es ist 1234 Uhr.") == []


def test_constrained_figures_are_consistent(trained_tiny_run, tmp_path, capsys):
    """`benchmark.py --constrained` on a trained run: its report and its record's figures."""
    import json

    from keras_transformer import cli
    from tests.conftest import run_entry_point

    code, out, err = run_entry_point(cli.benchmark_main, [
        "--constrained", trained_tiny_run, "--constrained-sentences", "20", "--engines-batch", "8",
        "--constrained-rounds", "1", "--record", str(tmp_path)], capsys)
    assert code == 0, err
    (path,) = tmp_path.iterdir()
    record = json.loads(path.read_text())
    figures = record["figures"]
    assert record["kind"] == "constrained" and record["corpus"]["split"] == "test"
    assert (record["corpus"]["sentences"], record["corpus"]["model_dir"]) == (20, trained_tiny_run)
    # Nearly every constraint met (a tiny model can run to its limit wanting to go on with a word: 39 of 40
    # when written), and far more than without them.
    assert figures["constrained"]["term_use"] >= 95.0
    assert figures["beam search"]["term_use"] < figures["constrained"]["term_use"] - 20.0
    ratio = figures["ratio"]
    assert abs(ratio["batch1"] - figures["constrained"]["batch1_ms"] / figures["beam search"]["batch1_ms"]) < 1e-9
    plain, steered = figures["beam search"], figures["constrained"]
    assert abs(ratio["batched"] - plain["batched_per_s"] / steered["batched_per_s"]) < 1e-9
    lines = out.splitlines()
    assert "20 sentences" in lines[0] and f"Record written to {path}" == lines[-1]
    assert lines[-2].startswith("  constrained / beam search time:")
