"""A CTranslate2 model directory from a trained Transformer: the TensorFlow-free CPU target.

CTranslate2 (OpenNMT) is a C++ inference engine with int8 and float16
weights. The model is described with its own Python spec API
(`ctranslate2.specs.TransformerSpec`) and written by its own `Converter`,
so no binary format is written here. The `ctranslate2` package is an
optional extra (`pip install -e ".[ctranslate2]"`); it is imported only
when this module's functions run, never by `import keras_transformer`.

How our layers map onto the spec (Keras kernels are (in, out); CTranslate2
weights are (out, in), so every kernel is transposed):

- embeddings: the (V, D) matrices as they are; both sides multiply by
  sqrt(D) (`scale_embeddings`), as `PositionalEmbedding` does;
- positions: our table interleaves sin and cos (sin, cos, sin, cos, ...)
  from position 0, while CTranslate2's built-in table puts all sines before
  all cosines and starts at position 1, so the exact table is written into
  the model (`position_encodings.encodings`, `max_positions` rows);
- self-attention: query, key and value fused into one (3D, D) linear;
  encoder-decoder attention: the query linear, then key and value fused
  into one (2D, D) linear; then the output linear;
- each sub-layer's LayerNorm goes with it; `norm_first` maps to
  `pre_norm`, and its final LayerNorm to the stack's `layer_norm`;
- the output projection: the tied embedding matrix or the untied kernel;
- the source EOS: our encoder input is pieces + EOS, so the model's config
  sets `add_source_eos`; decoding starts from BOS, as ours does.

Notation: V vocabulary, D model width.
"""

import importlib.util
import os
import shutil

import keras
import numpy as np

from keras_transformer.export.settings import VOCABULARY_FILENAME, translator_settings, write_settings
from keras_transformer.modeling.layers.embedding import sinusoidal_encoding
from keras_transformer.modeling.special_ids import BOS_ID, EOS_ID, UNK_ID

QUANTIZATIONS = ("int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16", "bfloat16",
                 "float32")
# Positions the written sinusoid table covers: inputs and outputs must fit in it.
DEFAULT_MAX_POSITIONS = 1024


def ctranslate2_installed():
    """Whether the optional `ctranslate2` extra is importable (without importing it)."""
    return importlib.util.find_spec("ctranslate2") is not None


def _array(value):
    """A Keras variable or tensor as a float32 numpy array (weights may be stored in float32 or not)."""
    return np.asarray(value.numpy() if hasattr(value, "numpy") else value, dtype=np.float32)


def _linear(spec, *denses):
    """Sets a LinearSpec from one or more Keras Dense layers fused along the output axis."""
    spec.weight = np.concatenate([_array(d.kernel).T for d in denses], axis=0)  # (sum of outs, in)
    if all(d.use_bias for d in denses):
        spec.bias = np.concatenate([_array(d.bias) for d in denses], axis=0)
    elif any(d.use_bias for d in denses):
        raise ValueError(f"Cannot fuse {[d.name for d in denses]}: some have biases and some do not.")


def _layer_norm(spec, norm):
    spec.gamma = _array(norm.gamma)
    spec.beta = _array(norm.beta)


def _self_attention(spec, attention, norm):
    _linear(spec.linear[0], attention.query_dense, attention.key_dense, attention.value_dense)  # (3D, D)
    _linear(spec.linear[1], attention.output_dense)
    _layer_norm(spec.layer_norm, norm)


def _cross_attention(spec, attention, norm):
    _linear(spec.linear[0], attention.query_dense)
    _linear(spec.linear[1], attention.key_dense, attention.value_dense)  # (2D, D)
    _linear(spec.linear[2], attention.output_dense)
    _layer_norm(spec.layer_norm, norm)


def _feed_forward(spec, block):
    _linear(spec.linear_0, block.feed_forward.inner_dense)
    _linear(spec.linear_1, block.feed_forward.output_dense)
    _layer_norm(spec.layer_norm, block.feed_forward_norm)


def check_convertible(model, source_vocabulary, target_vocabulary):
    """Raises ValueError naming whatever of `model` CTranslate2's Transformer spec cannot express."""
    if not model.built:
        raise ValueError("The model is not built; call model.build() or load its weights first.")
    activation = keras.activations.serialize(model.encoder.blocks[0].feed_forward.activation)
    if activation != "relu":
        raise ValueError(f"Feed-forward activation {activation!r} is not supported; expected 'relu'.")
    for name, vocabulary, size in (("source", source_vocabulary, model.vocab_size),
                                   ("target", target_vocabulary, model.output_vocab_size)):
        if len(vocabulary) != size:
            raise ValueError(f"The {name} vocabulary has {len(vocabulary)} tokens but the model's {name} "
                             f"embedding has {size} rows.")
        if len(set(vocabulary)) != len(vocabulary):
            raise ValueError(f"The {name} vocabulary has duplicate tokens; CTranslate2 looks tokens up by string.")
    if target_vocabulary[BOS_ID] == target_vocabulary[EOS_ID]:
        raise ValueError("BOS and EOS must be different tokens of the target vocabulary.")


def transformer_spec(model, source_vocabulary, target_vocabulary=None, max_positions=DEFAULT_MAX_POSITIONS):
    """The `ctranslate2.specs.TransformerSpec` of a `Transformer`, weights in float32.

    source_vocabulary / target_vocabulary: the token strings by id (the
    target defaults to the source: a shared vocabulary). Ids 1, 2 and 3
    are UNK, BOS and EOS (keras_transformer.data.tokenizer).
    max_positions: rows of the position table; inputs (with EOS) and
    outputs must each be shorter.
    """
    import ctranslate2  # noqa: PLC0415  (optional extra)

    target_vocabulary = source_vocabulary if target_vocabulary is None else target_vocabulary
    source_vocabulary, target_vocabulary = list(source_vocabulary), list(target_vocabulary)
    check_convertible(model, source_vocabulary, target_vocabulary)
    if int(max_positions) < 2:
        raise ValueError(f"max_positions must be at least 2; got {max_positions}.")

    spec = ctranslate2.specs.TransformerSpec.from_config(
        (model.num_encoder_layers, model.num_decoder_layers), model.num_heads, pre_norm=model.norm_first,
        activation=ctranslate2.specs.Activation.RELU,
    )
    _set_embeddings(spec, model, max_positions)
    _set_layers(spec, model)
    spec.config.layer_norm_epsilon = float(model.layer_norm_epsilon)
    spec.config.unk_token = target_vocabulary[UNK_ID]
    spec.config.bos_token = target_vocabulary[BOS_ID]
    spec.config.eos_token = target_vocabulary[EOS_ID]
    spec.config.decoder_start_token = target_vocabulary[BOS_ID]
    spec.config.add_source_eos = True  # our encoder input is pieces + EOS
    spec.register_source_vocabulary(source_vocabulary)
    spec.register_target_vocabulary(target_vocabulary)
    return spec


def _set_embeddings(spec, model, max_positions):
    """`spec`'s embeddings, position table and output projection from `model`'s."""
    positions = _array(sinusoidal_encoding(np.arange(max_positions), model.d_model,
                                           model.source_embedding.max_wavelength))  # (P, D)
    for side, embedding in ((spec.encoder, model.source_embedding), (spec.decoder, model.target_embedding)):
        side.scale_embeddings = True
        side.position_encodings.encodings = positions
    spec.encoder.embeddings[0].weight = _array(model.source_embedding.embeddings)  # (V, D)
    spec.decoder.embeddings.weight = _array(model.target_embedding.embeddings)  # (V_target, D)
    if model.output_projection is None:
        spec.decoder.projection.weight = spec.decoder.embeddings.weight  # tied: the same matrix
    else:
        spec.decoder.projection.weight = _array(model.output_projection.kernel).T  # (V_target, D)


def _set_layers(spec, model):
    """`spec`'s encoder and decoder layers (and pre-norm's final norms) from `model`'s."""
    for layer_spec, block in zip(spec.encoder.layer, model.encoder.blocks):
        _self_attention(layer_spec.self_attention, block.self_attention, block.self_attention_norm)
        _feed_forward(layer_spec.ffn, block)
    for layer_spec, block in zip(spec.decoder.layer, model.decoder.blocks):
        _self_attention(layer_spec.self_attention, block.self_attention, block.self_attention_norm)
        _cross_attention(layer_spec.attention, block.cross_attention, block.cross_attention_norm)
        _feed_forward(layer_spec.ffn, block)
    if model.norm_first:
        _layer_norm(spec.encoder.layer_norm, model.encoder.final_norm)
        _layer_norm(spec.decoder.layer_norm, model.decoder.final_norm)


def sentencepiece_vocabulary(model_path):
    """The pieces of a SentencePiece model, by id."""
    import sentencepiece as spm  # noqa: PLC0415

    processor = spm.SentencePieceProcessor(model_file=model_path)
    return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]


def write_spec(spec, output_dir, quantization="int8", settings=None):
    """Validates `spec`, quantizes its weights and writes it to `output_dir`
    with CTranslate2's own Converter, plus `settings` as keras_transformer.json.

    It is written to a temporary sibling and renamed, so a killed export
    leaves no half model; an existing `output_dir` is refused. Returns it.
    """
    from ctranslate2.converters import Converter  # noqa: PLC0415  (optional extra)

    if quantization not in QUANTIZATIONS:
        raise ValueError(f"Unknown quantization {quantization!r}; expected one of {list(QUANTIZATIONS)}.")
    if os.path.exists(output_dir):
        raise ValueError(f"{output_dir!r} already exists; pass another --output or delete it first.")

    class _Ready(Converter):
        def _load(self):
            return spec

    tmp = output_dir.rstrip(os.sep) + ".partial"
    shutil.rmtree(tmp, ignore_errors=True)
    _Ready().convert(tmp, quantization=quantization, force=True)
    write_settings(tmp, {"quantization": quantization, **(settings or {})})
    os.replace(tmp, output_dir)
    return output_dir


def export_ctranslate2(model, tokenizer_path, output_dir, quantization="int8", settings=None,
                       max_positions=DEFAULT_MAX_POSITIONS):
    """Writes `model` with its shared SentencePiece vocabulary as a CTranslate2 model directory.

    quantization: one of QUANTIZATIONS (the stored weight type; CTranslate2
        can still compute in another, see its `compute_type`).
    settings: decoding defaults stored next to the model (beam_size, alpha,
        max_input_length, extra_length), read by `export.ctranslate2_translator`.
    The directory holds model.bin, config.json, the vocabulary,
    `sentencepiece.model` and `keras_transformer.json` (see `write_spec`).
    Returns `output_dir`.
    """
    if os.path.exists(output_dir):  # before the conversion work, not after
        raise ValueError(f"{output_dir!r} already exists; pass another --output or delete it first.")
    spec = transformer_spec(model, sentencepiece_vocabulary(tokenizer_path), max_positions=max_positions)
    spec.register_file(tokenizer_path, VOCABULARY_FILENAME)
    return write_spec(spec, output_dir, quantization, {"max_positions": int(max_positions), **(settings or {})})


def export_translator_ctranslate2(translator, output_dir, quantization="int8"):
    """`export_ctranslate2` of a `Translator`'s model and vocabulary, with its
    beam size, alpha and length limits as the directory's decoding defaults
    (ValueError for an ensemble: CTranslate2's Transformer is one model)."""
    if len(translator.models) != 1:
        raise ValueError(f"A CTranslate2 model holds one Transformer; got an ensemble of {len(translator.models)}. "
                         "Export each member on its own.")
    # No "precision": CTranslate2 computes in its stored `quantization` (written by `write_spec`),
    # whatever policy the run trained in; and it decodes one best hypothesis.
    settings = {k: v for k, v in translator_settings(translator).items() if k not in ("precision", "n_best")}
    max_positions = max(DEFAULT_MAX_POSITIONS, translator.max_input_length + translator.extra_length + 1)
    return export_ctranslate2(translator.models[0], translator.tokenizer.model_path, output_dir, quantization,
                              settings, max_positions)
