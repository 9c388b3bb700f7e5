"""One loader for any model folder: a training run (or an ensemble of
runs), an exported SavedModel or a CTranslate2 model directory, which is
what `scripts/translate.py --model` and the benchmarks take.

Whatever it loads, `load_translator` returns an object with the same two
methods and result types:
- `translate(sentences, batch_size=64, progress=True, constraints=None,
  prefixes=None)`: a list of str -> `translator.Translations` (texts and
  scores, in the input's order); `constraints` (target phrases per
  sentence) and `prefixes` (a str per sentence) as `Translator.translate`
  takes them (a CTranslate2 model takes prefixes only);
- `__call__(sentences)`: a (B,) batch of strings -> ((B, N) UTF-8 strings,
  (B, N) float32 scores), best first, as `translator.translate_in_batches`
  runs it.
The scores mean one thing in all of them (`search.Hypotheses`).
"""

import os

import tensorflow as tf

from keras_transformer.decoding import restore
from keras_transformer.decoding.translator import PHRASE_SEPARATOR, check_term_counts, translate_in_batches
from keras_transformer.export.ctranslate2_translator import CTranslate2Translator, is_ctranslate2_model
from keras_transformer.export.settings import versions


class SavedModelTranslator:
    """Translates with an exported SavedModel's serving signature (its
    settings were fixed at export)."""

    def __init__(self, path):
        self.path = path
        signatures = tf.saved_model.load(path).signatures
        self.signature = signatures["serving_default"]
        self.constrained = signatures.get("translate_constrained")

    def __call__(self, sentences):
        return _as_n_best(self.signature(sentences=tf.convert_to_tensor(sentences, tf.string)))

    def constrained_call(self, sentences, constraints, prefixes):
        """`__call__` through the `translate_constrained` signature."""
        return _as_n_best(self.constrained(sentences=sentences, constraints=constraints, prefixes=prefixes))

    def translate(self, sentences, batch_size=64, progress=True, constraints=None, prefixes=None):
        """A list of str -> `Translations`, as `Translator.translate`."""
        if constraints is None and prefixes is None:
            return translate_in_batches(self, sentences, batch_size, progress)
        if self.constrained is None:
            raise ValueError(f"The SavedModel {self.path!r} has no translate_constrained signature (exported "
                             "before constraints existed); export it again to use constraints or prefixes.")
        sentences = list(sentences)
        constraints, prefixes = check_term_counts(sentences, constraints, prefixes)
        items = [(s, PHRASE_SEPARATOR.join(c), p) for s, c, p in zip(sentences, constraints, prefixes)]
        return translate_in_batches(self.constrained_call, items, batch_size, progress)


def _as_n_best(outputs):
    """A signature's (translations, scores): a 1-best export answers [B], an
    n-best one [B, N]; both as (B, N)."""
    batch = tf.shape(outputs["scores"])[0]
    return tf.reshape(outputs["translations"], [batch, -1]), tf.reshape(outputs["scores"], [batch, -1])


def find_saved_model(path):
    """The SavedModel directory at `path`: itself, or its highest integer version; None if neither."""
    if os.path.exists(os.path.join(path, "saved_model.pb")):
        return path
    for version in versions(path):
        if os.path.exists(os.path.join(path, str(version), "saved_model.pb")):
            return os.path.join(path, str(version))
    return None


def load_translator(path, beam_size=None, alpha=None, weights=None, threads=0, n_best=1, sampling=None,
                    precision=None, no_repeat_ngram_size=None, repetition_penalty=None, ranking="ours"):
    """A translator (see the module docstring) for a model directory, a
    SavedModel or a CTranslate2 directory (`threads`: its CPU threads, 0 =
    its default).

    `path` may be a list of training directories: an ensemble. `n_best` is
    N (1 for exports); `sampling` (a dict, see `Translator`) samples
    instead of beam search; `precision` builds a training run's model in
    another dtype policy than the one it trained in. Ensembles, n-best,
    sampling and precision need training directories.
    `no_repeat_ngram_size` and `repetition_penalty` (the decoding guards;
    None: the run's or the export's) apply to training directories and
    CTranslate2 models; a SavedModel's were fixed at export. `ranking`
    applies to CTranslate2 models (`CTranslate2Translator`).
    """
    paths = [path] if isinstance(path, str) else list(path)
    for one in paths:
        kind = ("a CTranslate2 model" if is_ctranslate2_model(one)
                else "an exported SavedModel" if find_saved_model(one) is not None else None)
        if kind and (len(paths) > 1 or n_best > 1 or sampling):
            raise ValueError(f"{one!r} is {kind}: ensembles, --n-best and sampling need training model "
                             "directories.")
        if kind and precision is not None:
            raise ValueError(f"{one!r} is {kind}: its precision was fixed at export; --precision applies to "
                             "training model directories.")
    path = paths[0]
    if is_ctranslate2_model(path):
        if weights is not None:
            raise ValueError(f"{path!r} is a CTranslate2 model: its weights were fixed at export; "
                             "--weights applies to training model directories.")
        return CTranslate2Translator(path, beam_size, alpha, threads=threads,
                                     no_repeat_ngram_size=no_repeat_ngram_size,
                                     repetition_penalty=repetition_penalty, ranking=ranking)
    if ranking != "ours":
        raise ValueError(f"{path!r} is not a CTranslate2 model: ranking={ranking!r} applies to CTranslate2 only.")
    saved_model = find_saved_model(path)
    if saved_model is not None:
        if any(value is not None for value in (beam_size, alpha, weights, no_repeat_ngram_size, repetition_penalty)):
            raise ValueError(
                f"{path!r} is an exported SavedModel: its beam size, alpha, decoding guards and weights were fixed "
                "at export; pass a training model directory to change them."
            )
        return SavedModelTranslator(saved_model)
    config, models, tokenizer = restore.restore_ensemble(paths, weights, precision)
    return restore.make_translator(config.decoding, models, tokenizer, beam_size, alpha, no_repeat_ngram_size,
                                   repetition_penalty, n_best=n_best, sampling=sampling)


def translate_lines(translator, sentences, batch_size=32, constraints=None, prefixes=None):
    """The best translation of each of a list of str, in order."""
    return translator.translate(sentences, batch_size, constraints=constraints, prefixes=prefixes).best


def n_best_lines(translator, sentences, batch_size=32, constraints=None, prefixes=None):
    """The n-best TSV lines: `index<TAB>rank<TAB>score<TAB>translation`, index
    and rank from 0, best first; one line per hypothesis, tabs, CR and LF in a
    translation replaced by spaces. Works for one hypothesis per sentence too."""
    translations, scores = translator.translate(sentences, batch_size, constraints=constraints, prefixes=prefixes)
    for index, (hypotheses, hypothesis_scores) in enumerate(zip(translations, scores)):
        for rank, (text, score) in enumerate(zip(hypotheses, hypothesis_scores)):
            clean = text.replace("\t", " ").replace("\n", " ").replace("\r", " ")
            yield f"{index}\t{rank}\t{float(score):.6f}\t{clean}"
