"""Decoding: search loops, the step function and ensembles, sampling filters,
the one `Translator`, teacher-forced scoring, quality figures, and loading a
trained run for inference.

The model-level searches are importable from here, as the README shows:
`decoding.greedy_search`, `decoding.beam_search`, `decoding.sample_search`.
"""

from keras_transformer.decoding.search import (DEFAULT_EXTRA_LENGTH, beam_search, beam_search_graph,
                                               greedy_search, greedy_search_graph, length_penalty, log_probs,
                                               sample_search, sample_search_graph)
from keras_transformer.decoding.translator import Translator

__all__ = ["DEFAULT_EXTRA_LENGTH", "Translator", "beam_search", "beam_search_graph", "greedy_search",
           "greedy_search_graph", "length_penalty", "log_probs", "sample_search", "sample_search_graph"]
