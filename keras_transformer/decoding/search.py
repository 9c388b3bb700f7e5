"""Greedy search, beam search (paper section 6.1) and sampling, with an incremental-decoding cache.

The search loops know nothing about the model: they call
`tokens_to_logits(ids, cache, step) -> (logits, cache)`, where `ids` holds
the tokens at position `step` (B*, 1) and `logits` the next-token scores
(B*, V) float32 (`decoding.step` builds it from a model or an ensemble).
The model-level functions at the end (`greedy_search`, `beam_search`,
`sample_search`) run them as `tf.function`s compiled once per model and
settings.

The searches run inside `tf.function` and `tf.while_loop` and are exported
in the SavedModel. By default the self-attention cache grows by one
position per step, so a step costs what the output so far costs, and a
sentence leaves the batch as soon as its output can no longer change
(greedy and beam search), so a batch costs what its sentences need, not
its longest one times its size. Given a fixed `max_length`, all loop state
has a fixed shape instead, which XLA needs (`jit_compile=True`). Both give
the same results within float rounding.

Notation: B sentences, K beams, N n-best, L maximum output length,
S source length, V vocabulary.
"""

import weakref

import tensorflow as tf

from keras_transformer.decoding.sampling import NEG_INF, check_sampling, filter_logits
from keras_transformer.decoding.step import check_ensemble, ensemble_tokens_to_logits, keep_rows, reorder_beams
from keras_transformer.decoding.top_k import top_k
from keras_transformer.modeling.special_ids import BOS_ID, EOS_ID, PAD_ID
# The paper: output length up to input length + 50.
DEFAULT_EXTRA_LENGTH = 50


def length_penalty(length, alpha):
    """GNMT length penalty ((5 + length) / 6)^alpha (Wu et al., 2016)."""
    return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, alpha)


def source_lengths(source_ids):
    """Number of non-padding ids per source row. (B, S) -> (B,) int32."""
    return tf.reduce_sum(tf.cast(tf.not_equal(source_ids, PAD_ID), tf.int32), axis=1)


def output_limits(source_ids, max_length=None, extra=DEFAULT_EXTRA_LENGTH):
    """Per-sentence output limits (B,) and the loop length L.

    Each sentence may produce at most source length + `extra` tokens (EOS
    included); `max_length`, if given, caps every limit.
    """
    limits = source_lengths(source_ids) + extra
    if max_length is not None:
        # A constant loop length gives the loop state static shapes (for XLA).
        return tf.minimum(limits, max_length), tf.constant(int(max_length))
    # max(..., 1): an empty batch still gives valid (if unused) shapes.
    return limits, tf.maximum(tf.reduce_max(limits), 1)


# ------------------------------------------------------------------ greedy
def _loop(cond, body, state, grows):
    """`tf.while_loop` over `state`; with `grows` (a growing cache, and
    finished sentences leaving the batch), every tensor of the state may
    change shape from one step to the next."""
    invariants = None
    if grows:
        invariants = tf.nest.map_structure(lambda t: tf.TensorShape([None] * t.shape.rank), state)
    return tf.while_loop(cond, body, state, shape_invariants=invariants)


def _drop_finished(done, order, outputs, results, sentences, cache, rows_per_sentence, beam_rows=None):
    """Moves the sentences that are `done` out of the batch.

    done: (B,) bool; order: (B,) int32, each sentence's index in the caller's
    batch; `results`: (B, ...) tensors whose rows of the done sentences go
    to those indices of the `outputs` buffers (B0, ...); `sentences`: (B, ...)
    per-sentence state; `cache`: rows_per_sentence rows per sentence, its
    beams still to be reordered by `beam_rows` if given (`step.keep_rows`
    does both in one gather).
    Returns (order, outputs, sentences, cache) for the sentences left. A
    finished sentence then costs nothing more, as in CTranslate2; a batch
    runs until its last sentence ends either way.
    """
    def drop():
        leaving = tf.cast(tf.where(done)[:, 0], tf.int32)
        staying = tf.cast(tf.where(tf.logical_not(done))[:, 0], tf.int32)
        at = tf.gather(order, leaving)[:, None]
        stored = tuple(tf.tensor_scatter_nd_update(out, at, tf.gather(result, leaving))
                       for out, result in zip(outputs, results))
        return (tf.gather(order, staying), stored, tuple(tf.gather(x, staying) for x in sentences),
                keep_rows(cache, staying, rows_per_sentence, beam_rows))

    def stay():
        return order, tuple(outputs), tuple(sentences), cache if beam_rows is None else reorder_beams(cache, beam_rows)

    return tf.cond(tf.reduce_any(done), drop, stay)


def _store(order, outputs, results):
    """Writes the (B, ...) `results` of the sentences still in the batch into the `outputs` buffers."""
    return tuple(tf.tensor_scatter_nd_update(out, order[:, None], result) for out, result in zip(outputs, results))


def _sequential_decode(tokens_to_logits, cache, batch_size, limits, loop_length, choose, with_scores=True,
                       grows=False, drop_finished=False):
    """One token per step, picked by `choose(logits (B, V), step) -> (B,) int32`.

    Returns ids (B, loop_length) int32 (the tokens, EOS included, then PAD)
    and scores (B,) float32: the sum of the model's log-probabilities of
    the chosen tokens, EOS included (zeros, and no log-softmax per step,
    without `with_scores`). With `drop_finished` (a growing cache from
    `decoding.step`), a sentence leaves the batch when it ends; `choose`
    must then not depend on the batch (greedy does not; sampling's random
    numbers do).
    """
    ids = tf.concat(
        [tf.fill([batch_size, 1], BOS_ID), tf.fill([batch_size, loop_length], PAD_ID)], axis=1
    )  # (B, L+1): BOS, then the outputs
    finished = tf.zeros([batch_size], tf.bool)
    scores = tf.zeros([batch_size], tf.float32)
    order = tf.range(batch_size)  # each row's sentence in the caller's batch
    outputs = (ids, scores)  # the finished sentences' (ids, scores), by `order`

    def cond(step, ids, finished, scores, limits, order, outputs, cache):
        return tf.logical_and(step < loop_length, tf.logical_not(tf.reduce_all(finished)))

    def body(step, ids, finished, scores, limits, order, outputs, cache):
        logits, cache = tokens_to_logits(ids[:, step][:, None], cache, step)  # (B, V); size known to XLA
        logits = tf.cast(logits, tf.float32)
        next_ids = choose(logits, step)  # (B,)
        next_ids = tf.where(step + 1 >= limits, EOS_ID, next_ids)  # the length limit forces EOS
        next_ids = tf.where(finished, PAD_ID, next_ids)
        if with_scores:
            token_log_probs = tf.gather(tf.nn.log_softmax(logits), next_ids, batch_dims=1)  # (B,)
            scores += tf.where(finished, 0.0, token_log_probs)
        at_next = tf.equal(tf.range(loop_length + 1), step + 1)  # (L+1,): a select keeps shapes static for XLA
        ids = tf.where(at_next[None, :], next_ids[:, None], ids)
        finished = tf.logical_or(finished, tf.equal(next_ids, EOS_ID))
        if drop_finished:
            order, outputs, (ids, finished, scores, limits), cache = _drop_finished(
                finished, order, outputs, (ids, scores), (ids, finished, scores, limits), cache, 1)
        return step + 1, ids, finished, scores, limits, order, outputs, cache

    state = (tf.constant(0), ids, finished, scores, limits, order, outputs, cache)
    _, ids, _, scores, _, order, outputs, _ = _loop(cond, body, state, grows)
    if drop_finished:
        ids, scores = _store(order, outputs, (ids, scores))
    return ids[:, 1:], scores


def greedy_decode(tokens_to_logits, cache, batch_size, limits, loop_length, grows=False, drop_finished=False):
    """Arg-max decoding. limits: (B,) per-sentence maximum output length.

    Returns (B, loop_length) int32: the tokens, EOS included, then PAD.
    """
    ids, _ = _sequential_decode(tokens_to_logits, cache, batch_size, limits, loop_length, _arg_max,
                                with_scores=False, grows=grows, drop_finished=drop_finished)
    return ids


def _arg_max(logits, step):
    return tf.argmax(logits, axis=-1, output_type=tf.int32)  # (B,)


def sample_decode(tokens_to_logits, cache, batch_size, limits, loop_length, seed, top_k=0, top_p=1.0,
                  temperature=1.0, grows=False):
    """Random sampling from the model's (filtered) next-token distribution.

    Stateless: step `t` draws with the seed (seed, t), so the same seed,
    input and batch give the same output. XLA compiles it too, and is as
    repeatable, but its random numbers are not TensorFlow's kernels': the
    same seed samples differently with and without XLA.
    Returns ids (B, loop_length) as `greedy_decode` does, and (B,) scores:
    the log-probabilities of the sampled tokens under the model itself
    (temperature 1, unfiltered), summed.
    """
    seed = tf.cast(seed, tf.int32)

    def choose(logits, step):
        filtered = filter_logits(logits, top_k, top_p, temperature)
        drawn = tf.random.stateless_categorical(filtered, 1, seed=tf.stack([seed, step]), dtype=tf.int32)
        return drawn[:, 0]  # (B,)

    return _sequential_decode(tokens_to_logits, cache, batch_size, limits, loop_length, choose, grows=grows)


# ------------------------------------------------------------------ beam search
def _beam_rows(indices, batch_size, beam_size):
    """(B, K_new) beam indices into K_old -> (B*K_new,) rows of a (B*K_old, ...) tensor."""
    batch_offsets = tf.range(batch_size)[:, None] * beam_size  # (B, 1)
    return tf.reshape(indices + batch_offsets, [-1])


def _beam_results(alive_ids, alive_log_probs, finished_ids, finished_scores, finished_flags, alpha, loop_length):
    """Each sentence's hypotheses, best first: its finished ones, or its live
    beams if none has finished (only possible if the loop ended early on the
    global length). -> ids (B, K, L+1), scores (B, K)."""
    any_finished = tf.reduce_any(finished_flags, axis=1)  # (B,)
    alive_scores = alive_log_probs / length_penalty(loop_length, alpha)
    ids = tf.where(any_finished[:, None, None], finished_ids, alive_ids)
    scores = tf.where(any_finished[:, None], finished_scores, alive_scores)
    return ids, scores


def beam_decode(tokens_to_logits, cache, batch_size, beam_size, alpha, limits, loop_length, n_best=1,
                grows=False, drop_finished=False):
    """Beam search with the GNMT length penalty and early stopping.

    Finished hypotheses (ended by EOS) are kept apart from live ones. A
    sentence is done when no live beam can still beat its n_best-th
    finished hypothesis (so its n best can no longer change), or at its
    length limit; the search stops when every sentence is done. With
    `drop_finished` (a growing cache from `decoding.step`), a done sentence
    leaves the batch at once.

    tokens_to_logits works on B*K rows; `cache` has B*K rows.
    limits: (B,) per-sentence maximum output lengths (EOS included).
    Returns ids (B, n_best, loop_length) int32 and scores (B, n_best) float32,
    best first; a score is log P(output) / length_penalty(len(output)).
    """
    k = beam_size
    alive_ids = tf.concat(
        [tf.fill([batch_size, k, 1], BOS_ID), tf.fill([batch_size, k, loop_length], PAD_ID)], axis=2
    )  # (B, K, L+1)
    # Only the first beam starts alive, so the first step does not pick K copies of one token.
    alive_log_probs = tf.tile(tf.constant([[0.0] + [NEG_INF] * (k - 1)]), [batch_size, 1])  # (B, K)
    finished_ids = tf.zeros_like(alive_ids)  # (B, K, L+1)
    finished_scores = tf.fill([batch_size, k], NEG_INF)  # (B, K)
    finished_flags = tf.zeros([batch_size, k], tf.bool)  # (B, K)
    order = tf.range(batch_size)  # each sentence's index in the caller's batch
    outputs = (alive_ids, alive_log_probs)  # the done sentences' (ids, scores), by `order`

    def sentences_done(step, alive_log_probs, finished_scores, finished_flags, limits):
        # Log-probabilities only fall and the penalty only grows with length, so
        # no continuation of a live beam can score above this bound.
        best_alive = tf.reduce_max(alive_log_probs, axis=1) / length_penalty(limits, alpha)  # (B,)
        # finished_scores is sorted, best first; unfilled slots score NEG_INF.
        nth_finished = tf.where(finished_flags[:, n_best - 1], finished_scores[:, n_best - 1], NEG_INF)  # (B,)
        return tf.logical_or(nth_finished > best_alive, step >= limits)  # (B,)

    def cond(step, alive_ids, alive_log_probs, finished_ids, finished_scores, finished_flags, limits, order,
             outputs, cache):
        done = tf.reduce_all(sentences_done(step, alive_log_probs, finished_scores, finished_flags, limits))
        return tf.logical_and(step < loop_length, tf.logical_not(done))

    def body(step, alive_ids, alive_log_probs, finished_ids, finished_scores, finished_flags, limits, order,
             outputs, cache):
        batch = tf.shape(alive_ids)[0]
        ids = tf.reshape(alive_ids[:, :, step], [-1, 1])  # (B*K, 1)
        logits, cache = tokens_to_logits(ids, cache, step)  # (B*K, V)
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32))  # (B*K, V)
        vocab = log_probs.shape[-1] or tf.shape(log_probs)[-1]  # static where known, as `top_k` wants
        log_probs = tf.reshape(log_probs, [batch, k, vocab])  # (B, K, V)
        # At its limit a sentence may only end. Most steps have no sentence
        # there, and skip two passes over the (B, K, V) array.
        at_limit = (step + 1 >= limits)[:, None, None]  # (B, 1, 1)
        only_eos = tf.one_hot(EOS_ID, vocab, on_value=0.0, off_value=NEG_INF)  # (V,)
        log_probs = tf.cond(tf.reduce_any(at_limit), lambda: tf.where(at_limit, log_probs + only_eos, log_probs),
                            lambda: log_probs)
        candidates = alive_log_probs[:, :, None] + log_probs  # (B, K, V)
        candidates = tf.reshape(candidates, [batch, k * vocab])  # (B, K*V)

        # 2K candidates are enough to keep K alive even if K of them end in EOS.
        top_log_probs, top_indices = top_k(candidates, 2 * k)  # (B, 2K), as tf.math.top_k
        top_beams, top_tokens = top_indices // vocab, top_indices % vocab  # (B, 2K)
        top_ids = tf.gather(alive_ids, top_beams, batch_dims=1)  # (B, 2K, L+1)
        at_next = tf.equal(tf.range(loop_length + 1), step + 1)  # (L+1,): a select keeps shapes static for XLA
        top_ids = tf.where(at_next[None, None, :], top_tokens[:, :, None], top_ids)  # (B, 2K, L+1)
        ended = tf.equal(top_tokens, EOS_ID)  # (B, 2K)
        # Only EOS candidates ranked within the top K end a hypothesis (as in
        # fairseq); lower-ranked ones are dropped. With K = 1 this is greedy.
        finishes = tf.logical_and(ended, tf.range(2 * k)[None, :] < k)  # (B, 2K)

        # Live: the best K that did not end.
        live_scores = tf.where(ended, NEG_INF, top_log_probs)
        alive_log_probs, alive_pick = tf.math.top_k(live_scores, k=k)  # (B, K)
        alive_ids = tf.gather(top_ids, alive_pick, batch_dims=1)  # (B, K, L+1)
        source_beams = tf.gather(top_beams, alive_pick, batch_dims=1)  # (B, K)
        beam_rows = _beam_rows(source_beams, batch, k)  # (B*K,): the row each live beam continues

        # Finished: merge those that ended now with the kept ones; keep the best K.
        penalty = length_penalty(step + 1, alpha)
        new_finished_scores = tf.where(finishes, top_log_probs / penalty, NEG_INF)  # (B, 2K)
        all_ids = tf.concat([finished_ids, top_ids], axis=1)  # (B, 3K, L+1)
        all_scores = tf.concat([finished_scores, new_finished_scores], axis=1)  # (B, 3K)
        all_flags = tf.concat([finished_flags, finishes], axis=1)  # (B, 3K)
        finished_scores, finished_pick = tf.math.top_k(all_scores, k=k)  # (B, K)
        finished_ids = tf.gather(all_ids, finished_pick, batch_dims=1)
        finished_flags = tf.gather(all_flags, finished_pick, batch_dims=1)
        sentences = (alive_ids, alive_log_probs, finished_ids, finished_scores, finished_flags, limits)
        if drop_finished:
            done = sentences_done(step + 1, alive_log_probs, finished_scores, finished_flags, limits)
            results = _beam_results(*sentences[:5], alpha, loop_length)
            order, outputs, sentences, cache = _drop_finished(done, order, outputs, results, sentences, cache, k,
                                                              beam_rows)
        else:
            cache = reorder_beams(cache, beam_rows)
        return (step + 1, *sentences, order, outputs, cache)

    state = (tf.constant(0), alive_ids, alive_log_probs, finished_ids, finished_scores, finished_flags, limits,
             order, outputs, cache)
    _, *sentences, _, order, outputs, _ = _loop(cond, body, state, grows)
    ids, scores = _beam_results(*sentences[:5], alpha, loop_length)
    if drop_finished:
        ids, scores = _store(order, outputs, (ids, scores))
    return ids[:, :n_best, 1:], scores[:, :n_best]


# ------------------------------------------------------------------ model-level API
# `model` in the functions below is a Transformer, or a list of Transformers
# sharing one vocabulary: an ensemble (`step.ensemble_tokens_to_logits`).
#
# Compiled searches are cached per first member: {model: {key: tf.function}}.
# Neither the dictionary nor the functions hold a model strongly (the
# functions reach the models through weak references), so a model nobody
# else holds is freed with its functions. Other ensemble members are part
# of the key as weak references: a dead member's reference never equals a
# new model's, even one that Python gives the same id().
_compiled = weakref.WeakKeyDictionary()


def _as_models(model):
    return check_ensemble(model) if isinstance(model, (list, tuple)) else [model]


def _compiled_search(model, key, build):
    """One tf.function per (model or ensemble, search settings), traced for any batch and length.

    build: (models, source_ids) -> outputs; called at trace time with the live models.
    """
    models = _as_models(model)
    functions = _compiled.setdefault(models[0], {})
    for stale in [k for k in functions if any(ref() is None for ref in k[0])]:
        del functions[stale]  # entries of ensembles whose other members are gone
    refs = tuple(weakref.ref(m) for m in models)
    key = (refs[1:],) + key
    if key not in functions:
        def search(source_ids):
            return build([ref() for ref in refs], source_ids)

        functions[key] = tf.function(search, input_signature=[tf.TensorSpec([None, None], tf.int32)])
    return functions[key]


def check_beam_settings(beam_size, n_best, alpha):
    """ValueError naming the first beam search setting outside its valid range."""
    if int(beam_size) < 1:
        raise ValueError(f"beam_size must be at least 1; got {beam_size}.")
    if not 1 <= int(n_best) <= int(beam_size):
        raise ValueError(f"n_best must be in [1, beam_size={beam_size}]; got {n_best}.")
    if alpha < 0:
        raise ValueError(f"alpha must be non-negative; got {alpha}.")


def _grows(use_cache, max_length):
    """Whether the searches keep a growing cache: with a cache, unless a fixed
    `max_length` asks for static shapes (for XLA, which needs them)."""
    return bool(use_cache) and max_length is None


def greedy_search_graph(model, source_ids, max_length=None, use_cache=True,
                        extra_length=DEFAULT_EXTRA_LENGTH, with_scores=False):
    """`greedy_search` without its own tf.function, to call inside another one.

    with_scores: also return (B,) float32 scores, the summed log-probabilities
    of the chosen tokens, EOS included (one log-softmax per step more).
    """
    limits, loop_length = output_limits(source_ids, max_length, extra_length)
    growing = _grows(use_cache, max_length)
    tokens_to_logits, cache = ensemble_tokens_to_logits(_as_models(model), source_ids, loop_length, 1, use_cache,
                                                        growing)
    batch = tf.shape(source_ids)[0]
    if with_scores:
        return _sequential_decode(tokens_to_logits, cache, batch, limits, loop_length, _arg_max, grows=growing,
                                  drop_finished=growing)
    return greedy_decode(tokens_to_logits, cache, batch, limits, loop_length, grows=growing, drop_finished=growing)


def sample_search_graph(model, source_ids, seed=0, top_k=0, top_p=1.0, temperature=1.0, max_length=None,
                        use_cache=True, extra_length=DEFAULT_EXTRA_LENGTH):
    """`sample_search` without its own tf.function, to call inside another one."""
    check_sampling(top_k, top_p, temperature)
    limits, loop_length = output_limits(source_ids, max_length, extra_length)
    growing = _grows(use_cache, max_length)
    tokens_to_logits, cache = ensemble_tokens_to_logits(_as_models(model), source_ids, loop_length, 1, use_cache,
                                                        growing)
    return sample_decode(tokens_to_logits, cache, tf.shape(source_ids)[0], limits, loop_length, seed,
                         int(top_k), float(top_p), float(temperature), grows=growing)


def beam_search_graph(model, source_ids, beam_size=4, alpha=0.6, max_length=None, use_cache=True, n_best=1,
                      extra_length=DEFAULT_EXTRA_LENGTH):
    """`beam_search` without its own tf.function, to call inside another one."""
    check_beam_settings(beam_size, n_best, alpha)
    batch = tf.shape(source_ids)[0]
    limits, loop_length = output_limits(source_ids, max_length, extra_length)
    growing = _grows(use_cache, max_length)
    tokens_to_logits, cache = ensemble_tokens_to_logits(_as_models(model), source_ids, loop_length, beam_size,
                                                        use_cache, growing)
    ids, scores = beam_decode(tokens_to_logits, cache, batch, beam_size, float(alpha), limits,
                              loop_length, n_best, grows=growing, drop_finished=growing)
    if n_best == 1:
        return ids[:, 0], scores[:, 0]
    return ids, scores


def greedy_search(model, source_ids, max_length=None, use_cache=True, extra_length=DEFAULT_EXTRA_LENGTH):
    """Greedy translation of (B, S) source ids -> (B, L) int32 ids (EOS, then PAD).

    Each output has at most source length + `extra_length` tokens, EOS
    included, and at most `max_length` if given. Runs as a tf.function,
    traced once per model and settings.
    """
    fn = _compiled_search(
        model, ("greedy", max_length, use_cache, extra_length),
        lambda models, ids: greedy_search_graph(models, ids, max_length, use_cache, extra_length),
    )
    return fn(tf.convert_to_tensor(source_ids, tf.int32))


def sample_search(model, source_ids, seed=0, top_k=0, top_p=1.0, temperature=1.0, max_length=None,
                  use_cache=True, extra_length=DEFAULT_EXTRA_LENGTH):
    """Random sampling of one translation per (B, S) source row.

    top_k: sample among the k most likely tokens (0: all); top_p: among the
    smallest set of tokens whose probability reaches p; temperature: divides
    the logits (towards 0: greedy). The same seed, input and batch give the
    same output. Returns (ids (B, L) int32, scores (B,)): the sampled tokens
    (EOS, then PAD) and their summed log-probabilities under the model.
    """
    check_sampling(top_k, top_p, temperature)
    fn = _compiled_search(
        model, ("sample", int(seed), int(top_k), float(top_p), float(temperature), max_length, use_cache,
                extra_length),
        lambda models, ids: sample_search_graph(models, ids, seed, top_k, top_p, temperature, max_length,
                                                use_cache, extra_length),
    )
    return fn(tf.convert_to_tensor(source_ids, tf.int32))


def beam_search(model, source_ids, beam_size=4, alpha=0.6, max_length=None, use_cache=True, n_best=1,
                extra_length=DEFAULT_EXTRA_LENGTH):
    """Beam search translation of (B, S) source ids.

    Returns (ids, scores): with n_best=1, ids (B, L) and scores (B,); with
    n_best > 1, ids (B, n_best, L) and scores (B, n_best), best first.
    Defaults are the paper's: beam 4, alpha 0.6, length up to input + 50.
    Runs as a tf.function, traced once per model and settings.
    """
    check_beam_settings(beam_size, n_best, alpha)
    fn = _compiled_search(
        model, ("beam", beam_size, float(alpha), max_length, use_cache, n_best, extra_length),
        lambda models, ids: beam_search_graph(models, ids, beam_size, alpha, max_length, use_cache, n_best,
                                              extra_length),
    )
    return fn(tf.convert_to_tensor(source_ids, tf.int32))
