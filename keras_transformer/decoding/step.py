"""The step function of every search: `tokens_to_logits(ids, cache, step) -> (logits, cache)`.

`model_tokens_to_logits` builds it from a `Transformer`, either with the
key/value cache (one token per step) or without it (the whole prefix every
step; for tests and benchmarks); `ensemble_tokens_to_logits` combines
several models, each with its own cache, into one callable. The searches
(`decoding.search`) know nothing else about the model.

Notation: B sentences, K beams (B* = B*K rows), H heads, S source length,
L maximum output length, V vocabulary.
"""

import tensorflow as tf

from keras_transformer.modeling.layers.dense import reading


def _tile_beams(x, beam_size):
    """(B, ...) -> (B*K, ...), each row repeated K times in place."""
    x = tf.expand_dims(x, 1)  # (B, 1, ...)
    multiples = [1, beam_size] + [1] * (len(x.shape) - 2)
    x = tf.tile(x, multiples)  # (B, K, ...)
    return tf.reshape(x, tf.concat([[-1], tf.shape(x)[2:]], axis=0))  # (B*K, ...)


def model_tokens_to_logits(model, source_ids, max_length, beam_size=1, use_cache=True, growing=False):
    """(tokens_to_logits, initial_cache) for a `Transformer` on `source_ids`.

    The encoder runs once here, and the cross-attention keys/values are
    projected once. With `use_cache`, the loop state holds the per-layer
    self-attention keys/values and each step decodes one token. The
    self-attention cache either has `max_length` positions from the start,
    written one step at a time (fixed shapes, which XLA needs; the
    cross-attention entries are captured as constants), or, with `growing`,
    holds exactly the positions decoded so far, so that a step's attention,
    cache write and beam reordering cost what the output so far costs (the
    loops must then let its shape change: `grows=True`). A growing cache also
    carries the cross-attention entries and the source ids, so that the
    searches can drop finished sentences from it (`keep_rows`). Without
    `use_cache`, each step re-runs the decoder over the whole prefix, which
    the step reads from `cache["prefix"]`.
    """
    # Encoding and the cross-attention projections run once per sentence; a
    # growing cache keeps one row of them per sentence, the others repeat them
    # for the sentence's K beams.
    encoder_output = model.encode(source_ids, training=False)  # (B, S, D)

    def tile(tree):
        return tf.nest.map_structure(lambda x: _tile_beams(x, beam_size), tree)

    if use_cache and growing:
        layers = model.init_cache(encoder_output, 0)
        # Everything a step reads is in the loop state, so that the search can
        # drop the rows of finished sentences (`keep_rows`). The entries under
        # SENTENCE_KEYS have one row per sentence, which its K beams share
        # (the attention layer reads a sentence's keys once for all its beams),
        # so beam reordering (`reorder_beams`) leaves them alone.
        cache = {"self": [tile(layer["self"]) for layer in layers],  # 2 x (B*K, H, 0, K) per layer, growing
                 "cross": [layer["cross"] for layer in layers],  # 2 x (B, H, S, K) per layer
                 "source_ids": source_ids}  # (B, S), for the cross-attention padding mask

        # Read and cast once, outside the loop: the steps touch no variable.
        output_matrix = model.output_matrix()
        weights = model.decoder_weights()

        def tokens_to_logits(ids, cache, step):
            full = [{"self": own, "cross": c} for own, c in zip(cache["self"], cache["cross"])]
            with reading(weights):
                logits, full = model.decode_next(ids, cache["source_ids"], full, training=False,
                                                 output_matrix=output_matrix)
            return logits[:, -1, :], {**cache, "self": [layer["self"] for layer in full]}  # (B*K, V)

        return tokens_to_logits, cache

    source_ids = _tile_beams(source_ids, beam_size)  # (B*K, S)
    if use_cache:
        layers = tile(model.init_cache(encoder_output, max_length))
        cross = [layer["cross"] for layer in layers]  # constant: 2 x (B*K, H, S, K) per layer
        cache = {"self": [layer["self"] for layer in layers]}  # 2 x (B*K, H, L, K) per layer
        weights = model.decoder_weights()

        def tokens_to_logits(ids, cache, step):
            full = [{"self": own, "cross": c} for own, c in zip(cache["self"], cross)]
            with reading(weights):
                logits, full = model.decode_step(ids, encoder_output, source_ids, full, step, training=False)
            return logits[:, -1, :], {"self": [layer["self"] for layer in full]}  # (B*K, V)
    else:
        encoder_output = tile(encoder_output)  # (B*K, S, D)
        batch = tf.shape(source_ids)[0]
        cache = {"prefix": tf.zeros([batch, max_length], tf.int32)}

        def tokens_to_logits(ids, cache, step):
            prefix = tf.tensor_scatter_nd_update(
                tf.transpose(cache["prefix"]), [[step]], tf.transpose(ids)
            )
            prefix = tf.transpose(prefix)  # (B*K, L) with position `step` written
            logits = model.decode(prefix[:, : step + 1], encoder_output, source_ids, training=False)
            return logits[:, -1, :], {"prefix": prefix}  # (B*K, V)

    return tokens_to_logits, cache


# Cache entries with one row per sentence, which its beams share.
SENTENCE_KEYS = ("cross", "source_ids")


def _gather_rows(tree, rows):
    return tf.nest.map_structure(lambda x: tf.gather(x, rows), tree)


def reorder_beams(cache, rows):
    """The cache of the beams picked by (B*K,) `rows`, each an index of the
    beam it continues in the same sentence; entries under SENTENCE_KEYS hold
    one row per sentence and stay as they are. An ensemble's cache is a
    tuple of its members'."""
    if isinstance(cache, tuple):
        return tuple(reorder_beams(member, rows) for member in cache)
    return {key: value if key in SENTENCE_KEYS else _gather_rows(value, rows) for key, value in cache.items()}


def keep_rows(cache, sentences, beam_size, beam_rows=None):
    """The cache of the (R,) `sentences` only (indices among its B): their
    row of each entry under SENTENCE_KEYS, and their K = `beam_size` rows of
    every other entry. With (B*K,) `beam_rows`, the beams are first
    reordered by them (`reorder_beams`) in the same gather: one copy of the
    self-attention cache instead of two."""
    if isinstance(cache, tuple):
        return tuple(keep_rows(member, sentences, beam_size, beam_rows) for member in cache)
    rows = tf.reshape(sentences[:, None] * beam_size + tf.range(beam_size)[None, :], [-1])  # (R*K,)
    if beam_rows is not None:
        rows = tf.gather(beam_rows, rows)  # the row each kept beam continues
    return {key: _gather_rows(value, sentences if key in SENTENCE_KEYS else rows) for key, value in cache.items()}


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


def ensemble_tokens_to_logits(models, source_ids, max_length, beam_size=1, use_cache=True, growing=False):
    """`model_tokens_to_logits` for a list of models decoding together.

    Each member encodes the source and keeps its own cache (the cache is the
    tuple of the members' caches); each step returns the combined
    log-probabilities (`combine_log_probs`), which the searches treat as
    logits (log-softmax leaves them unchanged). One model is itself.
    """
    models = check_ensemble(models)
    if len(models) == 1:
        return model_tokens_to_logits(models[0], source_ids, max_length, beam_size, use_cache, growing)
    members = [model_tokens_to_logits(m, source_ids, max_length, beam_size, use_cache, growing) for m in models]

    def tokens_to_logits(ids, cache, step):
        outputs = [fn(ids, own, step) for (fn, _), own in zip(members, cache)]
        log_probs = tf.stack([tf.nn.log_softmax(logits) for logits, _ in outputs])  # (M, B*, V)
        return combine_log_probs(log_probs), tuple(own for _, own in outputs)  # (B*, V)

    return tokens_to_logits, tuple(cache for _, cache in members)
