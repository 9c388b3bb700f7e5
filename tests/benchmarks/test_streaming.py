"""The benchmark's streaming section (benchmarks/streaming.py): training's start on a corpus and on ten times it."""

import re

import pytest

from benchmarks import streaming


@pytest.mark.slow
def test_both_corpora_train_an_update_and_the_ratio_is_of_their_figures():
    lines = []
    figures = streaming.streaming_figures(1000, report=lines.append, preset="tiny")
    assert (figures["streaming_small_pairs"], figures["streaming_large_pairs"]) == (100, 1000)
    assert figures["streaming_rss_ratio"] == (figures["streaming_large_peak_rss_gb"]
                                              / figures["streaming_small_peak_rss_gb"])
    assert [line.split(" pairs")[0] for line in lines[:2]] == ["7. wrote 100 generated", "7. wrote 1,000 generated"]
    for line, size in zip(lines[2:4], ("small", "large")):
        seconds, rss = re.fullmatch(r"7\. +[\d,]+ pairs: first update after +([\d.]+) s, peak RSS ([\d.]+) GB",
                                    line).groups()
        assert float(seconds) == pytest.approx(figures[f"streaming_{size}_seconds_to_first_update"], abs=0.05)
        assert float(rss) == pytest.approx(figures[f"streaming_{size}_peak_rss_gb"], abs=0.005)
    assert lines[4].startswith(f"7. 10x the pairs: {figures['streaming_rss_ratio']:.2f}x the peak RSS ")
    assert len(lines) == 5


def test_a_child_that_cannot_train_names_its_corpus(tmp_path):
    vocabulary = tmp_path / "sentencepiece.model"
    vocabulary.write_bytes(b"")
    with pytest.raises(RuntimeError, match=r"training on .*missing\.tsv failed"):
        streaming.first_update(str(tmp_path / "missing.tsv"), str(vocabulary), str(tmp_path / "run"), "tiny")
