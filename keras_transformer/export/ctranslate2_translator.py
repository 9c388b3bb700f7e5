"""Translation with a CTranslate2 model directory written by `export.ctranslate2`.

SentencePiece in, CTranslate2 beam search, SentencePiece out; TensorFlow is
not used. Awkward input gets the same defined results as `Translator`: a
blank sentence gives "" with score 0, and an input longer than
`max_input_length` pieces (EOS included) is truncated.

Scores and the length penalty are ours: CTranslate2's own penalty divides
the log-probability by length^alpha, not by GNMT's ((5 + length) / 6)^alpha,
so the same alpha would rank hypotheses differently. This translator asks
CTranslate2 for all its beam's finished hypotheses, ranked by the plain
log-probability (its length_penalty 0), and picks the best under our
penalty; the score is ours (`search.Hypotheses`). With alpha 0 both
engines rank by the plain log-probability and pick the same translations;
with alpha > 0 the two beams can still finish different hypotheses, so
they agree on most sentences, not all (docs/serving.md gives the figures).
`ranking="ctranslate2"` keeps CTranslate2's own ranking (one hypothesis,
its fastest: what the serving benchmark times) and still returns our
score of the hypothesis it picked (CTranslate2's score is the
log-probability over (length + 1)^alpha, EOS counted).

The output limit is set per batch (the longest input + extra_length), not
per sentence.

Forced prefixes map to CTranslate2's own `target_prefix` (the prefix's
pieces); CTranslate2 has no lexical constraints, so constraints raise
ValueError here (`decoding.constrained` has them).
"""

import os

import numpy as np

from keras_transformer.decoding.guards import check_guards
from keras_transformer.decoding.translator import check_term_counts, translate_in_batches
from keras_transformer.export.settings import VOCABULARY_FILENAME, read_settings


# How a CTranslate2 model's hypotheses are ranked (`CTranslate2Translator`).
RANKINGS = ("ours", "ctranslate2")


def gnmt_scores(log_probs, lengths, alpha):
    """Summed log-probabilities over GNMT's ((5 + length) / 6)^alpha, lengths
    counting EOS: `search.length_penalty` in NumPy, for CTranslate2's hypotheses."""
    return np.asarray(log_probs, np.float64) / ((5.0 + np.asarray(lengths, np.float64)) / 6.0) ** alpha


def is_ctranslate2_model(path):
    """True if `path` is a CTranslate2 model directory (model.bin and config.json)."""
    return os.path.isfile(os.path.join(path, "model.bin")) and os.path.isfile(os.path.join(path, "config.json"))


class CTranslate2Translator:
    """Translates lists of sentences with a CTranslate2 model directory.

    Args:
        path: the directory `scripts/export.py --format ctranslate2` wrote.
        beam_size, alpha: default to the run's, stored at export (the
            paper's unless it set others); alpha is our GNMT penalty's
            exponent, applied to CTranslate2's hypotheses (see the module
            docstring).
        compute_type: CTranslate2's compute type; "default" computes in the
            type the weights were stored in.
        threads: CPU threads for one translation (0: CTranslate2's default).
        device: "cpu" or "cuda".
        no_repeat_ngram_size, repetition_penalty: the decoding guards,
            CTranslate2's own options (default: those stored at export; off
            for exports that stored none).
        ranking: "ours" (our length penalty picks among CTranslate2's
            finished hypotheses) or "ctranslate2" (its own length^alpha).
    """

    def __init__(self, path, beam_size=None, alpha=None, compute_type="default", threads=0, device="cpu",
                 no_repeat_ngram_size=None, repetition_penalty=None, ranking="ours"):
        try:
            import ctranslate2  # noqa: PLC0415  (optional extra)
        except ImportError:
            raise ValueError(f"{path!r} is a CTranslate2 model, and translating with it needs the ctranslate2 "
                             'package: pip install -e ".[ctranslate2]".') from None
        import sentencepiece as spm  # noqa: PLC0415

        if ranking not in RANKINGS:
            raise ValueError(f"Unknown ranking {ranking!r}; expected one of {list(RANKINGS)}.")
        self.ranking = ranking
        if not is_ctranslate2_model(path):
            raise FileNotFoundError(f"{path!r} is not a CTranslate2 model directory (no model.bin/config.json).")
        settings = read_settings(path)
        self.beam_size = int(settings["beam_size"] if beam_size is None else beam_size)
        self.alpha = float(settings["alpha"] if alpha is None else alpha)
        if self.beam_size < 1:
            raise ValueError(f"beam_size must be at least 1; got {self.beam_size}.")
        if self.alpha < 0:
            raise ValueError(f"alpha must be non-negative; got {self.alpha}.")
        self.no_repeat_ngram_size = int(settings.get("no_repeat_ngram_size", 0) if no_repeat_ngram_size is None
                                        else no_repeat_ngram_size)
        self.repetition_penalty = float(settings.get("repetition_penalty", 1.0) if repetition_penalty is None
                                        else repetition_penalty)
        check_guards(self.no_repeat_ngram_size, self.repetition_penalty)
        self.max_input_length = int(settings["max_input_length"])
        self.extra_length = int(settings["extra_length"])
        self.max_positions = int(settings["max_positions"])
        self.sentencepiece = spm.SentencePieceProcessor(model_file=os.path.join(path, VOCABULARY_FILENAME))
        self.translator = ctranslate2.Translator(path, device=device, compute_type=compute_type,
                                                 intra_threads=int(threads))

    def translate_batch(self, sentences, prefixes=None):
        """A list of str -> (list of str, (B,) float32 scores), in order;
        `prefixes`: None, or a str per sentence its translation starts with ("": none)."""
        pieces = [self.sentencepiece.encode(s, out_type=str)[: self.max_input_length - 1] if s.strip() else []
                  for s in sentences]
        prefix_pieces = [self.sentencepiece.encode(p, out_type=str) if p else [] for p in prefixes or []]
        todo = [i for i, p in enumerate(pieces) if p]
        translations, scores = [""] * len(sentences), np.zeros(len(sentences), np.float32)
        if not todo:
            return translations, scores
        # Ours: at most input length (EOS included) + extra pieces, EOS included.
        longest = max(len(pieces[i]) for i in todo) + 1
        limit = min(longest + self.extra_length - 1, self.max_positions - 1)
        options = {}
        if prefix_pieces:  # ours raises the limit to hold a prefix and its EOS
            limit = max([limit] + [len(prefix_pieces[i]) for i in todo])
            options["target_prefix"] = [prefix_pieces[i] or None for i in todo]
        own = self.ranking == "ctranslate2"
        results = self.translator.translate_batch(
            [pieces[i] for i in todo], **options, beam_size=self.beam_size, length_penalty=self.alpha if own else 0.0,
            num_hypotheses=1 if own else self.beam_size,
            max_decoding_length=limit, min_decoding_length=0, max_input_length=0, return_scores=True,
            no_repeat_ngram_size=self.no_repeat_ngram_size, repetition_penalty=self.repetition_penalty,
        )
        # CTranslate2's scores leave a target prefix's pieces out; ours count them (`decoding.constrained`).
        prefix_log_probs = np.zeros(len(sentences))
        forced = [i for i in todo if prefix_pieces and prefix_pieces[i]]
        if forced:
            scored = self.translator.score_batch([pieces[i] for i in forced], [prefix_pieces[i] for i in forced])
            for i, result in zip(forced, scored):
                prefix_log_probs[i] = sum(result.log_probs[:-1])  # the prefix's pieces, without the EOS scored after
        for i, result in zip(todo, results):
            # Ours counts the EOS, which CTranslate2 leaves out of a hypothesis; the first of equals wins.
            lengths = np.array([len(h) + 1 for h in result.hypotheses], np.float64)
            log_probs = (np.asarray(result.scores, np.float64) * (lengths ** self.alpha if own else 1.0)
                         + prefix_log_probs[i])
            ranked = gnmt_scores(log_probs, lengths, self.alpha)
            best = 0 if own else int(np.argmax(ranked))
            translations[i] = self.sentencepiece.decode_pieces(result.hypotheses[best])
            scores[i] = ranked[best]
        return translations, scores

    def __call__(self, sentences):
        """(B,) tf.string or bytes -> (B, 1) UTF-8 bytes and (B, 1) scores, as `translate_in_batches` expects."""
        return self.prefixed_call(sentences, None, None)

    def prefixed_call(self, sentences, constraints, prefixes):
        """`__call__` with a prefix per sentence, or None (the constraints column is unused)."""
        def texts(column):
            return [s.decode("utf-8", "replace") if isinstance(s, bytes) else s for s in np.asarray(column).tolist()]

        translations, scores = self.translate_batch(texts(sentences), None if prefixes is None else texts(prefixes))
        return np.array([[t.encode("utf-8")] for t in translations], dtype=object), scores[:, None]

    def translate(self, sentences, batch_size=64, progress=True, constraints=None, prefixes=None):
        """Translates a list of str in length-sorted batches, as `Translator.translate` does;
        returns `Translations` (one hypothesis per sentence). `prefixes`: a str
        per sentence (CTranslate2's `target_prefix`); constraints raise ValueError."""
        if constraints is not None and any(constraints):
            raise ValueError("A CTranslate2 model has no lexically constrained search; translate with a "
                             "training directory or a SavedModel to use constraints (prefixes work here).")
        if prefixes is None:
            return translate_in_batches(self, sentences, batch_size, progress)
        sentences = list(sentences)
        _, prefixes = check_term_counts(sentences, None, prefixes)
        return translate_in_batches(self.prefixed_call, [(s, "", p) for s, p in zip(sentences, prefixes)],
                                    batch_size, progress)
