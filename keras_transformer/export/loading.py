"""A translate function for any model folder: a training run, an exported
SavedModel or a CTranslate2 model directory (what `scripts/translate.py
--model` and the benchmark take)."""

import os

import tensorflow as tf

from keras_transformer.decoding import restore
from keras_transformer.decoding.translator import translate_in_batches
from keras_transformer.export.ctranslate2_translator import CTranslate2Translator, is_ctranslate2_model
from keras_transformer.export.settings import versions


def find_saved_model(path):
    """The SavedModel directory at `path`: itself, or its highest integer version; None if neither."""
    if os.path.exists(os.path.join(path, "saved_model.pb")):
        return path
    for version in versions(path):
        if os.path.exists(os.path.join(path, str(version), "saved_model.pb")):
            return os.path.join(path, str(version))
    return None


def load_translate_function(path, beam_size=None, alpha=None, weights=None, threads=0, n_best=1, sampling=None,
                            precision=None):
    """A function (B,) tf.string -> (translations, scores) for a model directory, a
    SavedModel or a CTranslate2 directory (`threads`: its CPU threads, 0 = its default).

    `path` may be a list of training directories: an ensemble. `n_best` > 1
    makes translations and scores (B, n_best); `sampling` (a dict, see
    `Translator`) samples instead of beam search; `precision` builds a
    training run's model in another dtype policy than the one it trained
    in. Ensembles, n-best, sampling and precision need training directories.
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
        return CTranslate2Translator(path, beam_size, alpha, threads=threads)
    saved_model = find_saved_model(path)
    if saved_model is not None:
        if beam_size is not None or alpha is not None or weights is not None:
            raise ValueError(
                f"{path!r} is an exported SavedModel: its beam size, alpha and weights were fixed at export; "
                "pass a training model directory to change them."
            )
        signature = tf.saved_model.load(saved_model).signatures["serving_default"]

        def translate(sentences):
            outputs = signature(sentences=sentences)
            return outputs["translations"], outputs["scores"]

        return translate
    config, models, tokenizer = restore.restore_ensemble(paths, weights, precision)
    return restore.make_translator(config.decoding, models, tokenizer, beam_size, alpha, n_best=n_best,
                                   sampling=sampling).compiled()


def translate_lines(translate, sentences, batch_size=32):
    """Translations of a list of str, in order (lists of n-best strings with n-best)."""
    translations, _ = translate_in_batches(translate, sentences, batch_size)
    return translations


def n_best_lines(translate, sentences, batch_size=32):
    """The n-best TSV lines: `index<TAB>rank<TAB>score<TAB>translation`, index
    and rank from 0, best first; one line per hypothesis, tabs, CR and LF in a
    translation replaced by spaces. Works for one hypothesis per sentence too."""
    translations, scores = translate_in_batches(translate, sentences, batch_size)
    for index, (hypotheses, hypothesis_scores) in enumerate(zip(translations, scores)):
        if isinstance(hypotheses, str):
            hypotheses, hypothesis_scores = [hypotheses], [hypothesis_scores]
        for rank, (text, score) in enumerate(zip(hypotheses, hypothesis_scores)):
            clean = text.replace("\t", " ").replace("\n", " ").replace("\r", " ")
            yield f"{index}\t{rank}\t{float(score):.6f}\t{clean}"
