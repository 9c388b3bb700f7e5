"""The step function of every search: `tokens_to_logits(ids, cache, step) -> (logits, cache)`.

Two ways to decode, each a function returning `(tokens_to_logits, cache)`:
- `incremental_step`, what every user-facing search runs: the cache holds
  each decoder layer's self-attention keys and values for exactly the
  positions decoded so far (it grows by one position per step), and each
  step decodes one token;
- `recompute_step`: no key/value cache; each step re-runs the decoder over
  the whole prefix. A reference for tests and the speed benchmark.
`make_step` picks one and combines an ensemble's members, each with its own
cache. The searches (`decoding.search`) know nothing else about the model.

Both keep their loop state in a `StepCache`, which says which rows belong
to a beam and which to a sentence, so that the searches can reorder beams
(`reorder_beams`) and drop finished sentences (`keep_rows`) without knowing
what the cache holds.

Notation: B sentences, K beams (B* = B*K rows), H heads, S source length,
L maximum output length, D model width, V vocabulary.
"""

from typing import NamedTuple

import tensorflow as tf

from keras_transformer.modeling.layers.dense import reading


class StepCache(NamedTuple):
    """The loop state of a step function (nested structures of tensors)."""

    beams: object  # B*K rows, one per beam: reordered with the beams
    sentences: object  # B rows, one per sentence, shared by its K beams


def _tile_beams(x, beam_size):
    """(B, ...) -> (B*K, ...), each row repeated K times in place."""
    x = tf.expand_dims(x, 1)  # (B, 1, ...)
    multiples = [1, beam_size] + [1] * (len(x.shape) - 2)
    x = tf.tile(x, multiples)  # (B, K, ...)
    return tf.reshape(x, tf.concat([[-1], tf.shape(x)[2:]], axis=0))  # (B*K, ...)


def incremental_step(model, source_ids, beam_size=1):
    """(tokens_to_logits, StepCache) of a `Transformer` on (B, S) `source_ids`,
    decoding one token per step over a growing self-attention cache.

    The encoder runs once here, and each layer's cross-attention keys and
    values are projected once, one row per sentence, which its K beams share
    (the attention layer reads a sentence's keys once for all its beams).
    The decoder's weights and the tied output matrix are read and cast once
    too (`Transformer.decoder_weights`, `output_matrix`): the steps read no
    variable.
    """
    encoder_output = model.encode(source_ids, training=False)  # (B, S, D)
    layers = model.init_cache(encoder_output)
    cache = StepCache(
        beams=[tf.nest.map_structure(lambda x: _tile_beams(x, beam_size), layer["self"])
               for layer in layers],  # 2 x (B*K, H, 0, K) per layer, growing
        sentences={"cross": [layer["cross"] for layer in layers],  # 2 x (B, H, S, K) per layer
                   "source_ids": source_ids})  # (B, S), for the cross-attention padding mask
    output_matrix = model.output_matrix()
    weights = model.decoder_weights()

    def tokens_to_logits(ids, cache, step):
        layers = [{"self": own, "cross": cross} for own, cross in zip(cache.beams, cache.sentences["cross"])]
        with reading(weights):
            logits, layers = model.decode_next(ids, cache.sentences["source_ids"], layers, training=False,
                                               output_matrix=output_matrix)
        return logits[:, -1, :], cache._replace(beams=[layer["self"] for layer in layers])  # (B*K, V)

    return tokens_to_logits, cache


def recompute_step(model, source_ids, beam_size=1, loop_length=None):
    """(tokens_to_logits, StepCache) of a `Transformer` on (B, S) `source_ids`
    that re-runs the decoder over the whole prefix at every step (the
    cache holds the (B*K, loop_length) prefixes and the encoder output)."""
    encoder_output = model.encode(source_ids, training=False)  # (B, S, D)
    batch = tf.shape(source_ids)[0] * beam_size
    cache = StepCache(beams=tf.zeros([batch, loop_length], tf.int32),
                      sentences={"encoder_output": encoder_output, "source_ids": source_ids})

    def tokens_to_logits(ids, cache, step):
        prefix = tf.tensor_scatter_nd_update(tf.transpose(cache.beams), [[step]], tf.transpose(ids))
        prefix = tf.transpose(prefix)  # (B*K, L) with position `step` written
        encoded = tf.repeat(cache.sentences["encoder_output"], beam_size, axis=0)  # (B*K, S, D)
        source = tf.repeat(cache.sentences["source_ids"], beam_size, axis=0)  # (B*K, S)
        logits = model.decode(prefix[:, : step + 1], encoded, source, training=False)
        return logits[:, -1, :], cache._replace(beams=prefix)  # (B*K, V)

    return tokens_to_logits, cache


def reorder_beams(cache, rows):
    """The cache of the beams picked by (B*K,) `rows`, each an index of the
    beam it continues in the same sentence; sentence rows stay as they are."""
    return cache._replace(beams=tf.nest.map_structure(lambda x: tf.gather(x, rows), cache.beams))


def keep_rows(cache, sentences, beam_size, beam_rows=None):
    """The cache of the (R,) `sentences` only (indices among its B): their
    sentence rows, and their K = `beam_size` beam rows. With (B*K,)
    `beam_rows`, the beams are first reordered by them (`reorder_beams`) in
    the same gather: one copy of the self-attention cache instead of two."""
    rows = tf.reshape(sentences[:, None] * beam_size + tf.range(beam_size)[None, :], [-1])  # (R*K,)
    if beam_rows is not None:
        rows = tf.gather(beam_rows, rows)  # the row each kept beam continues
    return StepCache(beams=tf.nest.map_structure(lambda x: tf.gather(x, rows), cache.beams),
                     sentences=tf.nest.map_structure(lambda x: tf.gather(x, sentences), cache.sentences))


def check_ensemble(models):
    """A non-empty list of models with one source and one target vocabulary; ValueError otherwise."""
    models = list(models)
    if not models:
        raise ValueError("An ensemble needs at least one model; got none.")
    sizes = {(m.vocab_size, m.output_vocab_size) for m in models}
    if len(sizes) > 1:
        raise ValueError(f"Ensemble members must share their vocabularies; got (source, target) vocabulary "
                         f"sizes {[(m.vocab_size, m.output_vocab_size) for m in models]}.")
    return models


def combine_log_probs(log_probs):
    """The ensemble's next-token log-probabilities: log of the members' mean
    probability, as fairseq's EnsembleModel does. (M, ..., V) -> (..., V)."""
    members = tf.cast(tf.shape(log_probs)[0], tf.float32)
    return tf.reduce_logsumexp(log_probs, axis=0) - tf.math.log(members)


def make_step(models, source_ids, loop_length, beam_size=1, use_cache=True):
    """(tokens_to_logits, StepCache) for a list of models decoding together:
    `incremental_step` (`use_cache`) or `recompute_step` for each.

    An ensemble's members each encode the source and keep their own cache
    (the cache's beams and sentences are tuples of the members'); each step
    returns the combined log-probabilities (`combine_log_probs`), which the
    searches treat as logits (log-softmax leaves them unchanged). One model
    is itself.
    """
    def member(model):
        if use_cache:
            return incremental_step(model, source_ids, beam_size)
        return recompute_step(model, source_ids, beam_size, loop_length)

    models = check_ensemble(models)
    if len(models) == 1:
        return member(models[0])
    functions, caches = zip(*(member(m) for m in models))

    def tokens_to_logits(ids, cache, step):
        outputs = [fn(ids, StepCache(*own), step) for fn, own in zip(functions, zip(*cache))]
        log_probs = tf.stack([tf.nn.log_softmax(logits) for logits, _ in outputs])  # (M, B*, V)
        return combine_log_probs(log_probs), _joined([own for _, own in outputs])  # (B*, V)

    return tokens_to_logits, _joined(caches)


def _joined(caches):
    """One StepCache of the members' caches."""
    return StepCache(beams=tuple(c.beams for c in caches), sentences=tuple(c.sentences for c in caches))
