"""Translation from a training model directory, an exported SavedModel or a CTranslate2 model."""

import os

import tensorflow as tf

from keras_transformer.translator import translate_in_batches


def find_saved_model(path):
    """The SavedModel directory at `path`: itself, or its highest integer version; None if neither."""
    if os.path.exists(os.path.join(path, "saved_model.pb")):
        return path
    if os.path.isdir(path):
        versions = sorted((int(v) for v in os.listdir(path) if v.isdigit()
                           and os.path.exists(os.path.join(path, v, "saved_model.pb"))), reverse=True)
        if versions:
            return os.path.join(path, str(versions[0]))
    return None


def load_translate_function(path, beam_size=None, alpha=None, weights=None, threads=0):
    """A function (B,) tf.string -> (translations, scores) for a model directory, a
    SavedModel or a CTranslate2 directory (`threads`: its CPU threads, 0 = its default)."""
    from keras_transformer import ctranslate2_translator  # noqa: PLC0415

    if ctranslate2_translator.is_ctranslate2_model(path):
        if weights is not None:
            raise ValueError(f"{path!r} is a CTranslate2 model: its weights were fixed at export; "
                             "--weights applies to training model directories.")
        return ctranslate2_translator.CTranslate2Translator(path, beam_size, alpha, threads=threads)
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
    from keras_transformer import training  # noqa: PLC0415

    config, model, tokenizer = training.restore(path, weights)
    return training.make_translator(config, model, tokenizer, beam_size, alpha)._compiled()


def translate_lines(translate, sentences, batch_size=32):
    """Translations of a list of str, in order."""
    translations, _ = translate_in_batches(translate, sentences, batch_size)
    return translations
