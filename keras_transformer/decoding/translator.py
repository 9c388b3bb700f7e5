"""Strings in, translations out: tokenization, beam search and detokenization in one graph.

`Translator.translate_strings` is the function that the exported SavedModel
serves, and that evaluation and scripts/translate.py run, so all three give
the same translations.

Defined results for awkward input (the same in Python and in serving):
- an empty or whitespace-only sentence translates to "" with score 0.0;
- invalid UTF-8 bytes are replaced by U+FFFD before tokenization;
- a sentence longer than `max_input_length` pieces is truncated to that
  many pieces (EOS included) and translated;
- a batch of zero sentences gives zero translations.
Each sentence is decoded independently of the others in its batch (padding
is masked and every sentence has its own length limit).

Every result has one shape whatever the settings: N hypotheses per
sentence, best first, N = `n_best` for beam search and 1 otherwise.

Terminology (`decoding.constrained`): beam search can be given, per
sentence, target phrases that the translation must contain and a prefix
that it must start with (`translate(..., constraints=, prefixes=)`, and
`translate_constrained_strings` in the graph, where a sentence's phrases
are one string separated by PHRASE_SEPARATOR, a tab). In the graph, the
defined answers: a phrase that tokenizes to nothing is no constraint, and
only a sentence's first `beam_size` phrases count; the Python API raises
ValueError for both instead (`check_terms`).

Notation: B sentences, N hypotheses per sentence, S source pieces, L output pieces.
"""

from typing import NamedTuple

import numpy as np
import tensorflow as tf

from keras_transformer.config import DecodingSettings
from keras_transformer.decoding import sampling as sampling_filters
from keras_transformer.decoding import constrained, search
from keras_transformer.decoding.batching import in_length_order
from keras_transformer.decoding.guards import check_guards
from keras_transformer.decoding.step import check_ensemble


_RUN = DecodingSettings()  # a run's defaults
# Between the phrases of one sentence in `translate_constrained_strings` (and
# in a constraints file's line, and in the SavedModel's `translate_constrained`).
PHRASE_SEPARATOR = "\t"
# The length penalty as the traced searches take it (`Translator.compiled`).
_ALPHA_SPEC = tf.TensorSpec([], tf.float32, name="alpha")


class Translator(tf.Module):
    """Translates batches of sentences with a trained Transformer (or an ensemble).

    Args:
        model: a `Transformer`, or a list of them sharing the vocabulary (an
            ensemble; see `step.combine_log_probs`).
        tokenizer: the run's `Tokenizer` (shared vocabulary).
        beam_size, alpha, max_input_length, extra_length: default to a
            run's (`config.DecodingSettings`: the paper's beam search, and
            inputs cut as training cut its pairs).
        max_input_length: longer inputs are truncated to this many pieces.
        extra_length: outputs have at most input length + this many pieces.
        n_best: hypotheses per sentence (at most beam_size): the N of every
            result, best first.
        sampling: None for beam search, or a dict with any of top_k, top_p,
            temperature and seed: random sampling (`search.sample_search`),
            one translation per sentence.
        greedy: arg-max search instead of beam search (beam_size must be 1):
            it skips beam search's bookkeeping, so it is the cheap choice
            for scoring during training. Its translations equal beam 1's at
            alpha 0.

    Scores mean what beam search's do, whatever the search: the summed
    log-probability over the length penalty at `alpha` (`search.Hypotheses`).
    `alpha` may be set again: the traced searches (`compiled`,
    `compiled_constrained`) take it at each call, so a new one costs no
    retrace (the model choice tries several, `recipe.choose_length_penalty`);
    an export fixes the alpha of its time.
        no_repeat_ngram_size, repetition_penalty: the decoding guards
            (`decoding.guards`, CTranslate2's meaning), for every search;
            0 and 1.0 (the defaults) are off.

    `models` is always the list of members (one for a single model).
    """

    def __init__(self, model, tokenizer, beam_size=_RUN.beam_size, alpha=_RUN.alpha,
                 max_input_length=_RUN.max_input_length, extra_length=_RUN.extra_length, n_best=1, sampling=None,
                 greedy=False,
                 no_repeat_ngram_size=0, repetition_penalty=1.0, name="translator"):
        super().__init__(name=name)
        search.check_beam_settings(beam_size, n_best, alpha)
        check_guards(no_repeat_ngram_size, repetition_penalty)
        if int(max_input_length) < 2:
            raise ValueError(f"max_input_length must be at least 2; got {max_input_length}.")
        if sampling is not None:
            unknown = set(sampling) - {"top_k", "top_p", "temperature", "seed"}
            if unknown:
                raise ValueError(f"Unknown sampling setting(s) {sorted(unknown)}; expected top_k, top_p, "
                                 "temperature, seed.")
            sampling = {"top_k": 0, "top_p": 1.0, "temperature": 1.0, "seed": 0, **sampling}
            sampling_filters.check_sampling(sampling["top_k"], sampling["top_p"], sampling["temperature"])
            if int(n_best) != 1:
                raise ValueError(f"n_best applies to beam search; sampling gives one translation, got n_best={n_best}.")
        if greedy and (int(beam_size) != 1 or sampling is not None):
            raise ValueError(f"greedy search keeps one hypothesis and does not sample; got beam_size={beam_size}"
                             f"{', sampling' if sampling is not None else ''}.")
        self.models = check_ensemble(model if isinstance(model, (list, tuple)) else [model])
        self.tokenizer = tokenizer
        self.beam_size = int(beam_size)
        self.alpha = alpha
        self.max_input_length = int(max_input_length)
        self.extra_length = int(extra_length)
        self.n_best = int(n_best)
        self.sampling = sampling
        self.greedy = bool(greedy)
        self.no_repeat_ngram_size = int(no_repeat_ngram_size)
        self.repetition_penalty = float(repetition_penalty)

    @property
    def alpha(self):
        """The length penalty of the searches (GNMT's alpha, `search.length_penalty`)."""
        return self._alpha

    @alpha.setter
    def alpha(self, value):
        search.check_alpha(float(value))
        self._alpha = float(value)

    @property
    def _model(self):
        """What the searches take: the one model, or the ensemble's list."""
        return self.models[0] if len(self.models) == 1 else self.models

    def encode_sources(self, sentences):
        """(B,) strings -> (B, S) int32 source ids: pieces (truncated) + EOS, PAD-padded."""
        sentences = tf.strings.unicode_transcode(sentences, "UTF-8", "UTF-8", errors="replace")
        ids = self.tokenizer.encode_sources(sentences, self.max_input_length)  # ragged (B, None)
        return ids.to_tensor(shape=[None, None])

    def translate_ids(self, source_ids, alpha=None):
        """(B, S) source ids -> `search.Hypotheses`: ids (B, N, L) ending in EOS
        then PAD, and scores (B, N). `alpha`: a float32 scalar tensor, or None
        for `self.alpha` (a constant of the graph)."""
        alpha = self.alpha if alpha is None else alpha
        common = {"extra_length": self.extra_length, "no_repeat_ngram_size": self.no_repeat_ngram_size,
                  "repetition_penalty": self.repetition_penalty}
        if self.sampling is not None:
            return search.sample_search_graph(
                self._model, source_ids, self.sampling["seed"], self.sampling["top_k"], self.sampling["top_p"],
                self.sampling["temperature"], alpha=alpha, **common)
        if self.greedy:
            return search.greedy_search_graph(self._model, source_ids, alpha=alpha, **common)
        return search.beam_search_graph(self._model, source_ids, self.beam_size, alpha, n_best=self.n_best,
                                        **common)

    def encode_phrases(self, phrases):
        """(B,) strings of PHRASE_SEPARATOR-separated phrases -> (B, C, P) int32
        pieces, PAD-padded: a sentence's first `beam_size` phrases (the
        beam's limit, `check_terms`), each without BOS or EOS."""
        phrases = tf.strings.unicode_transcode(phrases, "UTF-8", "UTF-8", errors="replace")
        split = tf.strings.split(phrases, sep=PHRASE_SEPARATOR)[:, :self.beam_size]  # ragged (B, C)
        pieces = self.tokenizer.tokenize(split.flat_values)  # ragged (B*C, P)
        return tf.RaggedTensor.from_row_splits(pieces, split.row_splits).to_tensor()  # (B, C, P)

    def translate_constrained_ids(self, source_ids, constraints, prefixes, alpha=None):
        """`translate_ids` with (B, C, P) phrases every output must contain and
        (B, Q) prefixes it must start with (`constrained.constrained_search`)."""
        if self.sampling is not None or self.greedy:
            raise ValueError("Constraints and prefixes are a beam search's; this Translator samples or is greedy.")
        return constrained.constrained_search_graph(
            self._model, source_ids, constraints, prefixes, self.beam_size, self.alpha if alpha is None else alpha,
            n_best=self.n_best,
            extra_length=self.extra_length, no_repeat_ngram_size=self.no_repeat_ngram_size,
            repetition_penalty=self.repetition_penalty, continues_word=tf.constant(self.tokenizer.continues_word()))

    def translate_constrained_strings(self, sentences, constraints, prefixes, alpha=None):
        """`translate_strings` whose translations contain each sentence's phrases
        (`constraints`: (B,) strings, phrases separated by PHRASE_SEPARATOR,
        "" for none) and start with its prefix (`prefixes`: (B,) strings, ""
        for none). Runs in-graph."""
        sentences = tf.convert_to_tensor(sentences, tf.string)
        prefixes = tf.strings.unicode_transcode(prefixes, "UTF-8", "UTF-8", errors="replace")
        prefix_ids = self.tokenizer.tokenize(prefixes).to_tensor(shape=[None, None])
        return self._strings(sentences, lambda ids: self.translate_constrained_ids(
            ids, self.encode_phrases(constraints), prefix_ids, alpha))

    def translate_strings(self, sentences, alpha=None):
        """(B,) strings -> (translations (B, N) strings, scores (B, N) float32).
        Runs in-graph; `alpha` as `translate_ids`'."""
        return self._strings(tf.convert_to_tensor(sentences, tf.string), lambda ids: self.translate_ids(ids, alpha))

    def _strings(self, sentences, translate_ids):
        """(B,) strings -> (translations (B, N), scores (B, N)) of `translate_ids`
        on their source ids; blank sentences give "" and 0."""
        blank = tf.equal(tf.strings.length(tf.strings.strip(sentences)), 0)[:, None]  # (B, 1)
        ids, scores = translate_ids(self.encode_sources(sentences))  # (B, N, L), (B, N)
        shape = tf.shape(ids)
        flat = self.tokenizer.detokenize(tf.reshape(ids, [-1, shape[2]]))  # (B*N,)
        translations = tf.reshape(flat, shape[:2])  # (B, N)
        return tf.where(blank, "", translations), tf.where(blank, 0.0, scores)

    def translate(self, sentences, batch_size=64, progress=True, constraints=None, prefixes=None):
        """Translates a Python list of str -> `Translations`.

        constraints: None, or one list of target phrases (str) per sentence
            that its translation must contain; prefixes: None, or one str
            per sentence that its translation must start with ("": none).
            Bad ones raise ValueError (`check_terms`).
        """
        if constraints is None and prefixes is None:
            return translate_in_batches(self.compiled(), sentences, batch_size, progress)
        sentences = list(sentences)
        constraints, prefixes = self.check_terms(sentences, constraints, prefixes)
        joined = [PHRASE_SEPARATOR.join(phrases) for phrases in constraints]
        return translate_in_batches(self.compiled_constrained(), list(zip(sentences, joined, prefixes)),
                                    batch_size, progress)

    def check_terms(self, sentences, constraints, prefixes):
        """(constraints, prefixes) as lists as long as `sentences`, or
        ValueError naming the sentence: a count that differs from the
        sentences', a phrase holding PHRASE_SEPARATOR or tokenizing to nothing,
        or more phrases than the beam holds (at most `beam_size` a sentence:
        each phrase in progress needs a beam of its own to be kept)."""
        constraints, prefixes = check_term_counts(sentences, constraints, prefixes)
        phrases = [phrase for given in constraints for phrase in given]
        pieces = iter(self.tokenizer.tokenize(tf.constant(phrases, tf.string)).row_lengths().numpy().tolist()
                      if phrases else [])  # one call for all of them, in order
        for number, given in enumerate(constraints, start=1):
            if len(given) > self.beam_size:
                raise ValueError(f"Sentence {number} has {len(given)} constraints; beam size {self.beam_size} "
                                 f"holds at most {self.beam_size}.")
            for phrase in given:
                if not next(pieces) or PHRASE_SEPARATOR in phrase:
                    raise ValueError(f"Sentence {number}: the constraint {phrase!r} is empty or holds a tab; a "
                                     "constraint must be a phrase of the target language.")
        return constraints, prefixes

    def compiled_constrained(self):
        """`translate_constrained_strings` over three (B,) tf.string at the
        current `alpha`, through a tf.function traced once."""
        if not hasattr(self, "_constrained_function"):
            spec = tf.TensorSpec([None], tf.string)
            self._constrained_function = tf.function(self.translate_constrained_strings,
                                                     input_signature=[spec, spec, spec, _ALPHA_SPEC])
        return lambda sentences, constraints, prefixes: self._constrained_function(
            sentences, constraints, prefixes, tf.constant(self.alpha, tf.float32))

    def __call__(self, sentences):
        """(B,) strings -> ((B, N) UTF-8 strings, (B, N) float32 scores): one
        batch, through the traced function (`compiled`)."""
        return self.compiled()(tf.convert_to_tensor(sentences, tf.string))

    def compiled(self):
        """`translate_strings` over (B,) tf.string at the current `alpha`,
        through a tf.function traced once."""
        if not hasattr(self, "_function"):
            self._function = tf.function(self.translate_strings,
                                         input_signature=[tf.TensorSpec([None], tf.string), _ALPHA_SPEC])
        return lambda sentences: self._function(sentences, tf.constant(self.alpha, tf.float32))


def check_term_counts(sentences, constraints, prefixes):
    """(constraints, prefixes) as lists, one entry per sentence (None: none for
    any), or ValueError if either is given for another number of sentences."""
    constraints = [[] for _ in sentences] if constraints is None else [list(p) for p in constraints]
    prefixes = ["" for _ in sentences] if prefixes is None else [str(p) for p in prefixes]
    for name, given in (("constraints", constraints), ("prefixes", prefixes)):
        if len(given) != len(sentences):
            raise ValueError(f"{len(given)} lines of {name} for {len(sentences)} sentences; give one per sentence.")
    return constraints, prefixes


class Translations(NamedTuple):
    """The translations of a list of sentences, in its order."""

    texts: list  # one list of N str per sentence, best first
    scores: np.ndarray  # (sentences, N) float32

    @property
    def best(self):
        """The best translation of each sentence: a list of str."""
        return [hypotheses[0] for hypotheses in self.texts]


def translate_in_batches(function, sentences, batch_size=64, progress=True):
    """Runs `function((B,) tf.string) -> (translations, scores)` over a list of str
    (or over a list of tuples of str, the sentence first: `function` then takes
    one (B,) tf.string per field).

    `function` returns tensors or arrays of (B, N) UTF-8 bytes and (B, N)
    float scores. Sentences are batched by length (fewer padded positions)
    and put back in their original order (`batching.in_length_order`); a
    progress line goes to stderr. Returns `Translations`.
    """
    def run(batch):
        if isinstance(batch[0], tuple):  # (sentence, ...) tuples: one input per field
            out, scores = function(*(tf.constant(column, tf.string) for column in zip(*batch)))
        else:
            out, scores = function(tf.constant(batch, tf.string))
        return list(zip(np.asarray(out), np.asarray(scores)))

    sentences = list(sentences)
    lengths = [len(s[0] if isinstance(s, tuple) else s) for s in sentences]
    results = in_length_order(run, sentences, lengths, batch_size,
                              "Translated {done}/{total} sentences" if progress else None)
    texts = [[text.decode("utf-8") for text in hypotheses] for hypotheses, _ in results]
    scores = np.array([scores for _, scores in results], np.float32)  # (sentences, N)
    return Translations(texts, scores if texts else np.zeros((0, 1), np.float32))
