from keras_transformer.benchmarks import constrained


def test_reference_terms_are_the_two_longest_words_in_their_order():
    assert constrained.reference_terms("Klicken Sie auf Rückgängig, um die Formatierung zu entfernen.") == [
        "Rückgängig", "Formatierung"]
    assert constrained.reference_terms("Es ist 1234 Uhr.") == []


def test_constrained_figures_are_consistent(trained_tiny_run):
    lines = []
    figures = constrained.constrained_figures(trained_tiny_run, limit=20, batch_size=8, rounds=1,
                                              report=lines.append)
    # Nearly every constraint met (a tiny model can run to its limit wanting to go on with a word: 39 of 40
    # when written), and far more than without them.
    assert figures["constrained"]["term_use"] >= 95.0
    assert figures["beam search"]["term_use"] < figures["constrained"]["term_use"] - 20.0
    ratio = figures["ratio"]
    assert abs(ratio["batch1"] - figures["constrained"]["batch1_ms"] / figures["beam search"]["batch1_ms"]) < 1e-9
    plain, steered = figures["beam search"], figures["constrained"]
    assert abs(ratio["batched"] - plain["batched_per_s"] / steered["batched_per_s"]) < 1e-9
    assert "20 sentences" in lines[0] and lines[-1].startswith("  constrained / beam search time:")
