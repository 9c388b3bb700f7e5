"""A SavedModel for TF Serving: strings in, translations out.

Built with `keras.export.ExportArchive` (a Keras 3 model wrapped in a
tf.Module and saved with `tf.saved_model.save` fails in TF Serving's session
loader with "Could not find variable"; tensorflow/serving#2250).

Signatures:
- `serving_default`: `sentences` string [B] -> `translations` string [B],
  `scores` float32 [B]. Tokenization (tensorflow-text SentencePiece), cached
  beam search and detokenization all run in the graph.
- `translate_ids`: `source_ids` int32 [B, S] (pieces + EOS, 0-padded) ->
  `ids` int32 [B, L] (ending in EOS, then 0) and `scores` float32 [B].
- `translate_constrained`: `sentences` string [B], `constraints` string
  [B] (target phrases each translation must contain, separated by a tab;
  "" for none) and `prefixes` string [B] (what each translation must start
  with; "" for none) -> `translations` and `scores` as `serving_default`.
  Lexically constrained beam search (`decoding.constrained`). A phrase
  that tokenizes to nothing is ignored, and a sentence's phrases after its
  first beam-size ones, so one bad sentence never fails its batch. Not
  in an export of a greedy `Translator`.

Exported with n-best (`scripts/export.py --n-best N`, N > 1), the outputs
gain an axis: `translations` string [B, N] and `scores` float32 [B, N],
best first, and `ids` int32 [B, N, L]. Sampling is not exported: serving
is beam search.

Beam size, alpha and the maximum lengths are fixed at export time, and so
is the dtype policy the graph computes in (the run's, unless the export
asked for another). `assets/keras_transformer.json` records them all
(`settings`). The SentencePiece model is embedded in the graph and also
shipped as the asset `assets/sentencepiece.model`, for clients that want
the vocabulary.

Layout: `<base>/<version>/`, the integer version one above the highest
present, as `tensorflow_model_server --model_base_path=<base>` expects.
"""

import os
import shutil

import keras
import tensorflow as tf

from keras_transformer.export.settings import VOCABULARY_FILENAME, next_version, translator_settings, write_settings


def export_translator(translator, base):
    """Writes `translator` as a SavedModel to `<base>/<next version>/`; returns that path."""
    if translator.sampling is not None:
        raise ValueError("A sampling Translator cannot be exported; serving decodes with beam search.")
    path = os.path.join(base, str(next_version(base)))
    archive = keras.export.ExportArchive()
    for model in translator.models:
        archive.track(model)
    archive.track(translator.tokenizer)
    _add_endpoints(archive, translator)
    tmp = path + ".partial"
    try:
        archive.write_out(tmp, verbose=False)
        # ExportArchive keeps only TrackableResources of tracked objects, so the
        # model file is copied in by hand; the graph itself embeds the same bytes.
        os.makedirs(os.path.join(tmp, "assets"), exist_ok=True)
        shutil.copyfile(translator.tokenizer.model_path, os.path.join(tmp, "assets", VOCABULARY_FILENAME))
        write_settings(os.path.join(tmp, "assets"), translator_settings(translator))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # a failed export leaves nothing behind
        raise
    os.replace(tmp, path)  # a killed export never leaves a half-written version for the server
    return path


def _add_endpoints(archive, translator):
    """The serving signatures: serving_default (strings), translate_ids and, for a beam, translate_constrained."""
    # The signatures' contract: a 1-best export answers one translation per
    # sentence ([B]), an n-best export N of them ([B, N]).
    one_best = translator.n_best == 1

    def answer(names, outputs):  # (B, N, ...) outputs, keyed by `names`, as the contract wants them
        return {name: output[:, 0] if one_best else output for name, output in zip(names, outputs)}

    def serve(sentences):
        return answer(("translations", "scores"), translator.translate_strings(sentences))  # (B, N) each

    def serve_constrained(sentences, constraints, prefixes):
        return answer(("translations", "scores"),
                      translator.translate_constrained_strings(sentences, constraints, prefixes))

    def serve_ids(source_ids):
        return answer(("ids", "scores"), translator.translate_ids(source_ids))  # (B, N, L), (B, N)

    archive.add_endpoint(
        "serving_default", serve, input_signature=[tf.TensorSpec([None], tf.string, name="sentences")]
    )
    archive.add_endpoint(
        "translate_ids", serve_ids, input_signature=[tf.TensorSpec([None, None], tf.int32, name="source_ids")]
    )
    if not translator.greedy:  # constraints steer a beam
        archive.add_endpoint(
            "translate_constrained", serve_constrained,
            input_signature=[tf.TensorSpec([None], tf.string, name=name)
                             for name in ("sentences", "constraints", "prefixes")])
