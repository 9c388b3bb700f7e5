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


def restore_ensemble(model_dirs, weights=None):
    """(config of the first run, [models], tokenizer) of one or more training
    directories sharing one SentencePiece vocabulary; ValueError naming the
    first that does not. `weights` applies to a single directory only."""
    from keras_transformer import training  # noqa: PLC0415

    model_dirs = [model_dirs] if isinstance(model_dirs, str) else list(model_dirs)
    if weights is not None and len(model_dirs) > 1:
        raise ValueError(f"--weights applies to one model directory; got {len(model_dirs)}.")
    restored = [training.restore(path, weights) for path in model_dirs]
    config, _, tokenizer = restored[0]
    for path, (_, _, other) in zip(model_dirs[1:], restored[1:]):
        if other.model_proto != tokenizer.model_proto:
            raise ValueError(f"Ensemble members must share one vocabulary: {path!r} has another SentencePiece "
                             f"model than {model_dirs[0]!r}.")
    return config, [model for _, model, _ in restored], tokenizer


def load_translate_function(path, beam_size=None, alpha=None, weights=None, threads=0, n_best=1, sampling=None):
    """A function (B,) tf.string -> (translations, scores) for a model directory, a
    SavedModel or a CTranslate2 directory (`threads`: its CPU threads, 0 = its default).

    `path` may be a list of training directories: an ensemble. `n_best` > 1
    makes translations and scores (B, n_best); `sampling` (a dict, see
    `Translator`) samples instead of beam search. Ensembles, n-best and
    sampling need training directories.
    """
    from keras_transformer import ctranslate2_translator  # noqa: PLC0415

    paths = [path] if isinstance(path, str) else list(path)
    for one in paths:
        kind = ("a CTranslate2 model" if ctranslate2_translator.is_ctranslate2_model(one)
                else "an exported SavedModel" if find_saved_model(one) is not None else None)
        if kind and (len(paths) > 1 or n_best > 1 or sampling):
            raise ValueError(f"{one!r} is {kind}: ensembles, --n-best and sampling need training model "
                             "directories.")
    path = paths[0]
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

    config, models, tokenizer = restore_ensemble(paths, weights)
    model = models[0] if len(models) == 1 else models
    return training.make_translator(config, model, tokenizer, beam_size, alpha, n_best=n_best,
                                    sampling=sampling)._compiled()


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
