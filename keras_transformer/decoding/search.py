"""Greedy search, beam search (paper section 6.1) and sampling over a growing key/value cache.

The search loops know nothing about the model: they call
`tokens_to_logits(ids, cache, step) -> (logits, cache)`, where `ids` holds
the tokens at position `step` (B*, 1) and `logits` the next-token scores
(B*, V) float32 (`decoding.step` builds it from a model or an ensemble,
with its `StepCache`). The model-level functions at the end
(`greedy_search`, `beam_search`, `sample_search`) run them as
`tf.function`s compiled once per model and settings.

Every search returns one structure, `Hypotheses(ids (B, N, L), scores
(B, N))`, whatever its options: greedy search and sampling give N = 1,
beam search N = n_best. Its scores mean one thing in every search: the
summed log-probability of the tokens (EOS included) divided by the length
penalty at the search's alpha, the quantity beam search ranks by; at alpha
0 that is the summed log-probability itself (`log_probs` recovers it).
`scoring.score_ids` gives the same two figures for given translations.

The loop state may change shape from one step to the next: the cache
grows by one position per step, so a step costs what the output so far
costs, and with `drop_finished` a sentence leaves the batch as soon as its
output can no longer change, so a batch costs what its sentences need,
not its longest one times its size.

Notation: B sentences, K beams, N hypotheses per sentence, L maximum
output length, S source length, V vocabulary.
"""

import weakref
from typing import NamedTuple

import tensorflow as tf

from keras_transformer.config import PAPER_ALPHA, PAPER_BEAM_SIZE, PAPER_EXTRA_LENGTH
from keras_transformer.decoding.guards import check_guards, make_guard
from keras_transformer.decoding.sampling import NEG_INF, check_sampling, filter_logits
from keras_transformer.decoding.step import check_ensemble, keep_rows, make_step, reorder_beams
from keras_transformer.decoding.top_k import top_k
from keras_transformer.modeling.special_ids import BOS_ID, EOS_ID, PAD_ID

# Outputs are at most input length + this many tokens by default (the paper's).
DEFAULT_EXTRA_LENGTH = PAPER_EXTRA_LENGTH


class Hypotheses(NamedTuple):
    """What every search returns, best first along N."""

    ids: tf.Tensor  # (B, N, L) int32: the tokens, EOS included, then PAD
    scores: tf.Tensor  # (B, N) float32: summed log-probabilities / length_penalty(length, the search's alpha)


def length_penalty(length, alpha):
    """GNMT length penalty ((5 + length) / 6)^alpha (Wu et al., 2016)."""
    return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, alpha)


def lengths(ids):
    """(..., L) ids -> (...) int32: the non-PAD ids of each row (a source's
    pieces and EOS; an output's tokens, EOS included)."""
    return tf.reduce_sum(tf.cast(tf.not_equal(ids, PAD_ID), tf.int32), axis=-1)


def log_probs(hypotheses, alpha):
    """(B, N) float32: the summed log-probabilities behind `hypotheses.scores`
    of a search run at `alpha` (the scores times the length penalty)."""
    return hypotheses.scores * length_penalty(lengths(hypotheses.ids), alpha)


def normalized(hypotheses, alpha):
    """`hypotheses` whose scores are summed log-probabilities -> the same with
    scores divided by the length penalty at `alpha`, as beam search's."""
    return Hypotheses(hypotheses.ids, hypotheses.scores / length_penalty(lengths(hypotheses.ids), alpha))


def output_limits(source_ids, max_length=None, extra=DEFAULT_EXTRA_LENGTH):
    """Per-sentence output limits (B,) and the loop length L, their maximum.

    Each sentence may produce at most source length + `extra` tokens (EOS
    included); `max_length`, if given, caps every limit.
    """
    limits = lengths(source_ids) + extra
    if max_length is not None:
        limits = tf.minimum(limits, int(max_length))
    # max(..., 1): an empty batch still gives valid (if unused) shapes.
    return limits, tf.maximum(tf.reduce_max(limits), 1)


def written_at(ids, step, tokens):
    """`ids` (..., L+1) with position `step + 1` set to `tokens` (...)."""
    at_next = tf.equal(tf.range(tf.shape(ids)[-1]), step + 1)  # (L+1,)
    return tf.where(at_next, tokens[..., None], ids)


# ------------------------------------------------------------------ the loop both searches share
class _Loop(NamedTuple):
    """The `tf.while_loop` state of a search."""

    step: tf.Tensor  # () int32: the position whose token is fed next
    state: NamedTuple  # the search's per-sentence state, (B, ...) tensors
    order: tf.Tensor  # (B,) int32: each sentence's index in the caller's batch
    outputs: Hypotheses  # (B0, ...) buffers: the results of the sentences that left, by `order`
    cache: object  # the `StepCache`


def _drop_finished(done, loop, results, beam_rows, rows_per_sentence):
    """`loop` without the sentences that are `done` (B,) bool: their `results`
    (`Hypotheses` of (B, ...) rows) go to their places in `loop.outputs`, and
    the cache keeps the others' rows, its beams first reordered by the
    (B*K,) `beam_rows` if given, in the same gather (`step.keep_rows`). A
    finished sentence then costs nothing more, as in CTranslate2."""
    def drop():
        leaving = tf.cast(tf.where(done)[:, 0], tf.int32)
        staying = tf.cast(tf.where(tf.logical_not(done))[:, 0], tf.int32)
        at = tf.gather(loop.order, leaving)[:, None]
        stored = Hypotheses(*(tf.tensor_scatter_nd_update(out, at, tf.gather(result, leaving))
                              for out, result in zip(loop.outputs, results)))
        state = tf.nest.map_structure(lambda x: tf.gather(x, staying), loop.state)
        return (tf.gather(loop.order, staying), stored, state,
                keep_rows(loop.cache, staying, rows_per_sentence, beam_rows))

    def stay():
        cache = loop.cache if beam_rows is None else reorder_beams(loop.cache, beam_rows)
        return loop.order, loop.outputs, loop.state, cache

    order, outputs, state, cache = tf.cond(tf.reduce_any(done), drop, stay)
    return loop._replace(order=order, outputs=outputs, state=state, cache=cache)


def run_search(cache, state, advance, done, results, loop_length, rows_per_sentence, drop_finished):
    """Runs one search to its end; returns `Hypotheses` (B, N, L+1), BOS first.

    advance(step, state, cache) -> (state, cache, beam_rows): one step for
        every sentence; `beam_rows` (B*K,) says which beam row each new beam
        continues (None: no reordering, one row per sentence).
    done(step, state) -> (B,) bool: whose output can no longer change.
    results(state) -> `Hypotheses` (B, N, L+1) of the state as it stands.
    With `drop_finished`, done sentences leave the batch at once; `advance`
    must then not depend on the batch (greedy and beam search do not;
    sampling's random numbers do).
    """
    batch = tf.shape(state.limits)[0]
    first = _Loop(tf.constant(0), state, tf.range(batch), results(state), cache)

    def cond(loop):
        return tf.logical_and(loop.step < loop_length, tf.logical_not(tf.reduce_all(done(loop.step, loop.state))))

    def body(loop):
        state, cache, beam_rows = advance(loop.step, loop.state, loop.cache)
        loop = loop._replace(state=state, cache=cache)
        if drop_finished:
            loop = _drop_finished(done(loop.step + 1, state), loop, results(state), beam_rows, rows_per_sentence)
        elif beam_rows is not None:
            loop = loop._replace(cache=reorder_beams(cache, beam_rows))
        return (loop._replace(step=loop.step + 1),)

    # Every tensor of the state may change shape: the cache grows, sentences leave.
    invariants = tf.nest.map_structure(lambda t: tf.TensorShape([None] * t.shape.rank), first)
    (loop,) = tf.while_loop(cond, body, (first,), shape_invariants=(invariants,))
    final = results(loop.state)
    if not drop_finished:
        return final
    return Hypotheses(*(tf.tensor_scatter_nd_update(out, loop.order[:, None], result)
                        for out, result in zip(loop.outputs, final)))


# ------------------------------------------------------------------ one token at a time: greedy and sampling
class SequentialState(NamedTuple):
    """Per-sentence state of greedy search and sampling."""

    ids: tf.Tensor  # (B, L+1) int32: BOS, then the tokens so far, then PAD
    finished: tf.Tensor  # (B,) bool
    scores: tf.Tensor  # (B,) float32: summed log-probabilities of the chosen tokens
    limits: tf.Tensor  # (B,) int32: maximum output length, EOS included


def sequential_decode(tokens_to_logits, cache, limits, loop_length, choose, drop_finished=True, guard=None):
    """One token per step, picked by `choose(logits (B, V), step) -> (B,) int32`.

    guard: None, or `guards.make_guard`'s function, which changes each
    step's logits given the tokens produced so far.
    Returns `Hypotheses`: ids (B, 1, loop_length) int32 (the tokens, EOS
    included, then PAD) and scores (B, 1) float32, the sum of the model's
    log-probabilities of the chosen tokens, EOS included.
    """
    batch = tf.shape(limits)[0]
    ids = tf.concat([tf.fill([batch, 1], BOS_ID), tf.fill([batch, loop_length], PAD_ID)], axis=1)  # (B, L+1)
    state = SequentialState(ids, tf.zeros([batch], tf.bool), tf.zeros([batch], tf.float32), limits)

    def advance(step, state, cache):
        logits, cache = tokens_to_logits(state.ids[:, step][:, None], cache, step)  # (B, V)
        logits = tf.cast(logits, tf.float32)
        if guard is not None:
            logits = guard(logits, state.ids[:, 1:step + 1])  # (B, V), given the (B, step) tokens so far
        next_ids = choose(logits, step)  # (B,)
        next_ids = tf.where(step + 1 >= state.limits, EOS_ID, next_ids)  # the length limit forces EOS
        next_ids = tf.where(state.finished, PAD_ID, next_ids)
        token_log_probs = tf.gather(tf.nn.log_softmax(logits), next_ids, batch_dims=1)  # (B,)
        return SequentialState(
            ids=written_at(state.ids, step, next_ids),
            finished=tf.logical_or(state.finished, tf.equal(next_ids, EOS_ID)),
            scores=state.scores + tf.where(state.finished, 0.0, token_log_probs),
            limits=state.limits), cache, None

    def results(state):
        return Hypotheses(state.ids[:, None], state.scores[:, None])  # (B, 1, L+1), (B, 1)

    ids, scores = run_search(cache, state, advance, lambda step, state: state.finished, results, loop_length,
                          1, drop_finished)
    return Hypotheses(ids[:, :, 1:], scores)


def arg_max(logits, step):
    """Greedy search's choice: the most likely token. (B, V) -> (B,) int32."""
    return tf.argmax(logits, axis=-1, output_type=tf.int32)


def sampler(seed, top_k=0, top_p=1.0, temperature=1.0):
    """Sampling's choice: a draw from the filtered distribution (`filter_logits`).

    Stateless: step `t` draws with the seed (seed, t), so the same seed,
    input and batch give the same output (and the batch must not change
    during the search: no `drop_finished`).
    """
    seed = tf.cast(seed, tf.int32)

    def choose(logits, step):
        filtered = filter_logits(logits, top_k, top_p, temperature)
        drawn = tf.random.stateless_categorical(filtered, 1, seed=tf.stack([seed, step]), dtype=tf.int32)
        return drawn[:, 0]  # (B,)

    return choose


# ------------------------------------------------------------------ beam search
class BeamState(NamedTuple):
    """Per-sentence state of beam search: live beams and finished hypotheses, kept apart."""

    alive_ids: tf.Tensor  # (B, K, L+1) int32
    alive_log_probs: tf.Tensor  # (B, K) float32: log P of each live prefix
    finished_ids: tf.Tensor  # (B, K, L+1) int32
    finished_scores: tf.Tensor  # (B, K) float32: log P / length penalty, sorted, NEG_INF when unfilled
    finished_flags: tf.Tensor  # (B, K) bool: whether that slot holds a hypothesis
    limits: tf.Tensor  # (B,) int32: maximum output length, EOS included


def initial_beams(limits, beam_size, loop_length):
    batch, k = tf.shape(limits)[0], beam_size
    alive_ids = tf.concat(
        [tf.fill([batch, k, 1], BOS_ID), tf.fill([batch, k, loop_length], PAD_ID)], axis=2)  # (B, K, L+1)
    # Only the first beam starts alive, so the first step does not pick K copies of one token.
    alive_log_probs = tf.tile(tf.constant([[0.0] + [NEG_INF] * (k - 1)]), [batch, 1])  # (B, K)
    return BeamState(alive_ids, alive_log_probs, tf.zeros_like(alive_ids), tf.fill([batch, k], NEG_INF),
                     tf.zeros([batch, k], tf.bool), limits)


def only_eos_at_limit(log_probs, step, limits, vocab):
    """(B, K, V) log-probabilities where a sentence at its length limit may only end.
    Most steps have no sentence there, and skip two passes over the array."""
    at_limit = (step + 1 >= limits)[:, None, None]  # (B, 1, 1)
    only_eos = tf.one_hot(EOS_ID, vocab, on_value=0.0, off_value=NEG_INF)  # (V,)
    return tf.cond(tf.reduce_any(at_limit), lambda: tf.where(at_limit, log_probs + only_eos, log_probs),
                   lambda: log_probs)


def beam_log_probs(tokens_to_logits, alive_ids, cache, step, k, guard=None):
    """(log_probs (B, K, V) float32, V, cache): the next-piece log-probabilities
    of the K live beams `alive_ids` (B, K, L+1) at `step`, `guard` applied to
    the logits; V static where known, as `top_k` wants."""
    ids = tf.reshape(alive_ids[:, :, step], [-1, 1])  # (B*K, 1)
    logits, cache = tokens_to_logits(ids, cache, step)  # (B*K, V)
    logits = tf.cast(logits, tf.float32)
    if guard is not None:
        produced = alive_ids[:, :, 1:step + 1]  # (B, K, step): each beam's tokens so far
        logits = guard(logits, tf.reshape(produced, [tf.shape(logits)[0], step]))  # (B*K, V)
    log_probs = tf.nn.log_softmax(logits)  # (B*K, V)
    vocab = log_probs.shape[-1] or tf.shape(log_probs)[-1]
    return tf.reshape(log_probs, [-1, k, vocab]), vocab, cache


def beam_results(beams, alpha, loop_length):
    """`Hypotheses` (B, K, L+1) of a `BeamState` as it stands: each sentence's
    finished hypotheses, or its live beams if none has finished (only
    possible if the loop ended early on the global length)."""
    any_finished = tf.reduce_any(beams.finished_flags, axis=1)  # (B,)
    alive_scores = beams.alive_log_probs / length_penalty(loop_length, alpha)
    return Hypotheses(tf.where(any_finished[:, None, None], beams.finished_ids, beams.alive_ids),
                      tf.where(any_finished[:, None], beams.finished_scores, alive_scores))


def _beam_step(state, log_probs, step, alpha, k, vocab):
    """The new state from (B, K, V) next-token log-probabilities, and (B*K,)
    the row of the old beam each new live beam continues."""
    batch = tf.shape(log_probs)[0]
    candidates = tf.reshape(state.alive_log_probs[:, :, None] + log_probs, [batch, k * vocab])  # (B, K*V)
    # 2K candidates are enough to keep K alive even if K of them end in EOS.
    top_log_probs, top_indices = top_k(candidates, 2 * k)  # (B, 2K), as tf.math.top_k
    top_beams, top_tokens = top_indices // vocab, top_indices % vocab  # (B, 2K)
    top_ids = written_at(tf.gather(state.alive_ids, top_beams, batch_dims=1), step, top_tokens)  # (B, 2K, L+1)
    ended = tf.equal(top_tokens, EOS_ID)  # (B, 2K)
    # Only EOS candidates ranked within the top K end a hypothesis (as in
    # fairseq); lower-ranked ones are dropped. With K = 1 this is greedy.
    finishes = tf.logical_and(ended, tf.range(2 * k)[None, :] < k)  # (B, 2K)

    # Live: the best K that did not end.
    alive_log_probs, alive_pick = tf.math.top_k(tf.where(ended, NEG_INF, top_log_probs), k=k)  # (B, K)
    source_beams = tf.gather(top_beams, alive_pick, batch_dims=1)  # (B, K)
    beam_rows = tf.reshape(source_beams + tf.range(batch)[:, None] * k, [-1])  # (B*K,)

    # Finished: merge those that ended now with the kept ones; keep the best K.
    new_scores = tf.where(finishes, top_log_probs / length_penalty(step + 1, alpha), NEG_INF)  # (B, 2K)
    all_scores = tf.concat([state.finished_scores, new_scores], axis=1)  # (B, 3K)
    finished_scores, finished_pick = tf.math.top_k(all_scores, k=k)  # (B, K)
    return BeamState(
        alive_ids=tf.gather(top_ids, alive_pick, batch_dims=1),  # (B, K, L+1)
        alive_log_probs=alive_log_probs,
        finished_ids=tf.gather(tf.concat([state.finished_ids, top_ids], axis=1), finished_pick, batch_dims=1),
        finished_scores=finished_scores,
        finished_flags=tf.gather(tf.concat([state.finished_flags, finishes], axis=1), finished_pick, batch_dims=1),
        limits=state.limits), beam_rows


def beam_decode(tokens_to_logits, cache, beam_size, alpha, limits, loop_length, n_best=1, drop_finished=True,
                guard=None):
    """Beam search with the GNMT length penalty and early stopping.

    A sentence is done when no live beam can still beat its n_best-th
    finished hypothesis (so its n best can no longer change), or at its
    length limit; the search stops when every sentence is done.
    tokens_to_logits works on B*K rows; `cache` has B*K beam rows.
    limits: (B,) per-sentence maximum output lengths (EOS included).
    guard: as in `sequential_decode`, applied to each beam's logits.
    Returns `Hypotheses`: ids (B, n_best, loop_length) int32 and scores
    (B, n_best) float32, best first; a score is log P(output) /
    length_penalty(len(output)).
    """
    k = beam_size

    def advance(step, state, cache):
        log_probs, vocab, cache = beam_log_probs(tokens_to_logits, state.alive_ids, cache, step, k, guard)
        log_probs = only_eos_at_limit(log_probs, step, state.limits, vocab)
        state, beam_rows = _beam_step(state, log_probs, step, alpha, k, vocab)
        return state, cache, beam_rows

    def done(step, state):
        # Log-probabilities only fall and the penalty only grows with length, so
        # no continuation of a live beam can score above this bound.
        best_alive = tf.reduce_max(state.alive_log_probs, axis=1) / length_penalty(state.limits, alpha)  # (B,)
        nth = n_best - 1  # finished_scores is sorted, best first
        nth_finished = tf.where(state.finished_flags[:, nth], state.finished_scores[:, nth], NEG_INF)  # (B,)
        return tf.logical_or(nth_finished > best_alive, step >= state.limits)  # (B,)

    def results(state):
        return beam_results(state, alpha, loop_length)

    ids, scores = run_search(cache, initial_beams(limits, k, loop_length), advance, done, results, loop_length,
                          k, drop_finished)
    return Hypotheses(ids[:, :n_best, 1:], scores[:, :n_best])


# ------------------------------------------------------------------ model-level API
# `model` in the functions below is a Transformer, or a list of Transformers
# sharing one vocabulary: an ensemble (`step.make_step`).
#
# Compiled searches are cached per first member: {model: {key: tf.function}}.
# Neither the dictionary nor the functions hold a model strongly (the
# functions reach the models through weak references), so a model nobody
# else holds is freed with its functions. Other ensemble members are part
# of the key as weak references: a dead member's reference never equals a
# new model's, even one that Python gives the same id().
_compiled = weakref.WeakKeyDictionary()


def as_models(model):
    return check_ensemble(model) if isinstance(model, (list, tuple)) else [model]


# What a compiled search takes by default: (B, S) source ids.
SOURCE_SIGNATURE = (tf.TensorSpec([None, None], tf.int32),)


def compiled_search(model, key, build, signature=SOURCE_SIGNATURE):
    """One tf.function per (model or ensemble, search settings), traced for any batch and length.

    build: (models, *inputs) -> outputs; called at trace time with the live
    models. signature: the inputs' `tf.TensorSpec`s (default: source ids).
    """
    models = as_models(model)
    functions = _compiled.setdefault(models[0], {})
    for stale in [k for k in functions if any(ref() is None for ref in k[0])]:
        del functions[stale]  # entries of ensembles whose other members are gone
    refs = tuple(weakref.ref(m) for m in models)
    key = (refs[1:],) + key
    if key not in functions:
        def search(*inputs):
            return build([ref() for ref in refs], *inputs)

        functions[key] = tf.function(search, input_signature=list(signature))
    return functions[key]


def check_beam_settings(beam_size, n_best, alpha):
    """ValueError naming the first beam search setting outside its valid range."""
    if int(beam_size) < 1:
        raise ValueError(f"beam_size must be at least 1; got {beam_size}.")
    if not 1 <= int(n_best) <= int(beam_size):
        raise ValueError(f"n_best must be in [1, beam_size={beam_size}]; got {n_best}.")
    if not tf.is_tensor(alpha):  # a tensor's value is its maker's to check (`Translator.alpha`)
        check_alpha(alpha)


def check_alpha(alpha):
    """ValueError unless the length penalty's alpha is non-negative."""
    if alpha < 0:
        raise ValueError(f"alpha must be non-negative; got {alpha}.")


def as_alpha(alpha):
    """A search's length penalty as it takes it: a Python number (a constant
    of the traced graph), or a float32 scalar tensor, read at each call (so a
    `Translator`'s traced search serves any alpha without a retrace)."""
    return alpha if tf.is_tensor(alpha) else float(alpha)


def greedy_search_graph(model, source_ids, max_length=None, use_cache=True, extra_length=DEFAULT_EXTRA_LENGTH,
                        no_repeat_ngram_size=0, repetition_penalty=1.0, alpha=PAPER_ALPHA):
    """`greedy_search` without its own tf.function, to call inside another one."""
    guard = make_guard(no_repeat_ngram_size, repetition_penalty)
    limits, loop_length = output_limits(source_ids, max_length, extra_length)
    tokens_to_logits, cache = make_step(as_models(model), source_ids, loop_length, 1, use_cache)
    return normalized(sequential_decode(tokens_to_logits, cache, limits, loop_length, arg_max, guard=guard),
                       as_alpha(alpha))


def sample_search_graph(model, source_ids, seed=0, top_k=0, top_p=1.0, temperature=1.0, max_length=None,
                        use_cache=True, extra_length=DEFAULT_EXTRA_LENGTH, no_repeat_ngram_size=0,
                        repetition_penalty=1.0, alpha=PAPER_ALPHA):
    """`sample_search` without its own tf.function, to call inside another one."""
    check_sampling(top_k, top_p, temperature)
    guard = make_guard(no_repeat_ngram_size, repetition_penalty)
    limits, loop_length = output_limits(source_ids, max_length, extra_length)
    tokens_to_logits, cache = make_step(as_models(model), source_ids, loop_length, 1, use_cache)
    choose = sampler(seed, int(top_k), float(top_p), float(temperature))
    hypotheses = sequential_decode(tokens_to_logits, cache, limits, loop_length, choose, drop_finished=False,
                                   guard=guard)
    return normalized(hypotheses, as_alpha(alpha))


def beam_search_graph(model, source_ids, beam_size=PAPER_BEAM_SIZE, alpha=PAPER_ALPHA, max_length=None,
                      use_cache=True, n_best=1, extra_length=DEFAULT_EXTRA_LENGTH, no_repeat_ngram_size=0,
                      repetition_penalty=1.0):
    """`beam_search` without its own tf.function, to call inside another one."""
    check_beam_settings(beam_size, n_best, alpha)
    guard = make_guard(no_repeat_ngram_size, repetition_penalty)
    limits, loop_length = output_limits(source_ids, max_length, extra_length)
    tokens_to_logits, cache = make_step(as_models(model), source_ids, loop_length, beam_size, use_cache)
    return beam_decode(tokens_to_logits, cache, beam_size, as_alpha(alpha), limits, loop_length, n_best, guard=guard)


def greedy_search(model, source_ids, max_length=None, use_cache=True, extra_length=DEFAULT_EXTRA_LENGTH,
                  no_repeat_ngram_size=0, repetition_penalty=1.0, alpha=PAPER_ALPHA):
    """Greedy translation of (B, S) source ids -> `Hypotheses` (B, 1, L), (B, 1).

    Each output has at most source length + `extra_length` tokens, EOS
    included, and at most `max_length` if given; its score is the summed
    log-probability of its tokens over the length penalty at `alpha`, as
    beam search's (alpha does not change the output; 0: the summed
    log-probability). `use_cache=False` re-runs the decoder
    over the whole prefix at every step (a reference for tests and
    benchmarks). `no_repeat_ngram_size` and `repetition_penalty` are the
    decoding guards (`decoding.guards`; off by default), here and in every
    search. Runs as a tf.function, traced once per model and settings.
    """
    check_guards(no_repeat_ngram_size, repetition_penalty)
    guards = (int(no_repeat_ngram_size), float(repetition_penalty))
    fn = compiled_search(
        model, ("greedy", max_length, use_cache, extra_length, guards, float(alpha)),
        lambda models, ids: greedy_search_graph(models, ids, max_length, use_cache, extra_length, *guards,
                                                alpha=alpha),
    )
    return fn(tf.convert_to_tensor(source_ids, tf.int32))


def sample_search(model, source_ids, seed=0, top_k=0, top_p=1.0, temperature=1.0, max_length=None,
                  use_cache=True, extra_length=DEFAULT_EXTRA_LENGTH, no_repeat_ngram_size=0, repetition_penalty=1.0,
                  alpha=PAPER_ALPHA):
    """Random sampling of one translation per (B, S) source row -> `Hypotheses` (B, 1, L), (B, 1).

    top_k: sample among the k most likely tokens (0: all); top_p: among the
    smallest set of tokens whose probability reaches p; temperature: divides
    the logits (towards 0: greedy). The same seed, input and batch give the
    same output. Scores are the sampled tokens' summed log-probabilities
    under the model itself (temperature 1, unfiltered) over the length
    penalty at `alpha`, as greedy search's.
    """
    check_sampling(top_k, top_p, temperature)
    check_guards(no_repeat_ngram_size, repetition_penalty)
    guards = (int(no_repeat_ngram_size), float(repetition_penalty))
    fn = compiled_search(
        model, ("sample", int(seed), int(top_k), float(top_p), float(temperature), max_length, use_cache,
                extra_length, guards, float(alpha)),
        lambda models, ids: sample_search_graph(models, ids, seed, top_k, top_p, temperature, max_length,
                                                use_cache, extra_length, *guards, alpha=alpha),
    )
    return fn(tf.convert_to_tensor(source_ids, tf.int32))


def beam_search(model, source_ids, beam_size=PAPER_BEAM_SIZE, alpha=PAPER_ALPHA, max_length=None,
                use_cache=True, n_best=1, extra_length=DEFAULT_EXTRA_LENGTH, no_repeat_ngram_size=0,
                repetition_penalty=1.0):
    """Beam search translation of (B, S) source ids -> `Hypotheses` (B, n_best, L), (B, n_best).

    Best first. Defaults are the paper's (`config.PAPER_BEAM_SIZE`,
    `PAPER_ALPHA`, `PAPER_EXTRA_LENGTH`). Runs as a tf.function, traced
    once per model and settings.
    """
    check_beam_settings(beam_size, n_best, alpha)
    check_guards(no_repeat_ngram_size, repetition_penalty)
    guards = (int(no_repeat_ngram_size), float(repetition_penalty))
    fn = compiled_search(
        model, ("beam", beam_size, float(alpha), max_length, use_cache, n_best, extra_length, guards),
        lambda models, ids: beam_search_graph(models, ids, beam_size, alpha, max_length, use_cache, n_best,
                                              extra_length, *guards),
    )
    return fn(tf.convert_to_tensor(source_ids, tf.int32))
