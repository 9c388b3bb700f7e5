"""Lexically constrained beam search and forced prefixes, in the same loop as beam search.

Each sentence may carry target phrases that its output must contain
(constraints, as pieces) and a target prefix that its output must start
with. Both are tensors, so the search runs in one graph and exports:
- constraints (B, C, P) int32: C phrases of at most P pieces per sentence,
  PAD-padded; a phrase of no pieces is no constraint;
- prefixes (B, Q) int32: the pieces each output starts with, PAD-padded.

How the beam is shared (dynamic beam allocation, Post and Vilar, NAACL
2018, in the vectorised form of Hu et al., NAACL 2019): at every step the
candidates are beam search's best 2K continuations, plus, for every live
beam, the next piece of each phrase it has not met yet (where it has got to
in that phrase, or its start) and the beam's own best non-EOS piece. A
candidate's bank is the number of constraint pieces it has produced: those
of the phrases it has met, and for the others the longest start of the
phrase its output ends with. The K live beams are then dealt round the
banks, best bank first: the best candidate of every bank, then the second
of every bank, and so on. A hypothesis whose output only partly meets its
constraints thereby keeps a place in the beam against likelier ones that
met none.

A hypothesis may not end (EOS is impossible) until it has met every
constraint, except at its output limit, where every hypothesis ends. The
finished hypotheses are ranked with those that met all their constraints
first, then by score; so a sentence whose constraints could not all be met
within its limit still gets a translation: the best-scoring of those that
reached the limit, which lacks some phrase.

Phrases are whole words, as a glossary's terms are: a phrase's pieces
start a word (SentencePiece's "▁"), and with `continues_word` (the (V,)
pieces that continue a word: they start with a letter, a digit or "_",
without "▁") a phrase the output has just completed is met only once the
next piece does not continue its last word (EOS included), so that
"sieben" is never met inside "siebeneinhalb", while "Invest" and
"Investition" can both be met. Until then it counts as met for the banks
and for ending. The term-use rate counts whole words the same way
(`terminology.term_use`).

A forced prefix makes every other piece impossible at the steps it covers;
its pieces' log-probabilities count in the score (CTranslate2 leaves them
out of its scores: `export.ctranslate2_translator` adds them), and on the
first step after it only the best candidate may end the output, as
CTranslate2 does with its `target_prefix`. A sentence's output limit is
raised to hold its prefix and EOS if the prefix is longer than its limit.

A sentence with no constraints and no prefix has exactly beam search's
candidates, banks and choices, so its output and score are beam search's
to the bit (tests/decoding/test_constrained.py).

Notation: B sentences, K beams, M candidates per sentence (3K + K*C), C
phrases per sentence, P pieces per phrase, Q prefix pieces, L maximum
output length, V vocabulary.
"""

from typing import NamedTuple

import tensorflow as tf

from keras_transformer.config import PAPER_ALPHA, PAPER_BEAM_SIZE
from keras_transformer.decoding import search
from keras_transformer.decoding.guards import check_guards, make_guard
from keras_transformer.decoding.sampling import NEG_INF
from keras_transformer.decoding.step import make_step
from keras_transformer.decoding.top_k import top_k
from keras_transformer.modeling.special_ids import EOS_ID, PAD_ID

# Finished hypotheses that miss a constraint rank below every one that met
# them all (but above empty slots, NEG_INF): their ranking key is lowered by this.
UNMET_PENALTY = 1.0e6

CONSTRAINED_SIGNATURE = (tf.TensorSpec([None, None], tf.int32),  # source ids (B, S)
                         tf.TensorSpec([None, None, None], tf.int32),  # constraints (B, C, P)
                         tf.TensorSpec([None, None], tf.int32))  # prefixes (B, Q)


class ConstrainedState(NamedTuple):
    """Per-sentence state: beam search's, and what each beam has met of its sentence's phrases."""

    beams: search.BeamState
    alive_met: tf.Tensor  # (B, K, C) bool: phrase c occurs in live beam k's output as whole words (or is empty)
    finished_met: tf.Tensor  # (B, K) bool: the finished hypothesis met every phrase
    finished_keys: tf.Tensor  # (B, K) float32: its ranking key (score, less UNMET_PENALTY if it missed one)
    constraints: tf.Tensor  # (B, C, P) int32
    prefixes: tf.Tensor  # (B, Q) int32

    @property
    def limits(self):
        return self.beams.limits


def phrase_lengths(phrases):
    """(..., P) PAD-padded pieces -> (...) int32 lengths."""
    return tf.reduce_sum(tf.cast(tf.not_equal(phrases, PAD_ID), tf.int32), axis=-1)


def phrase_progress(ids, step, constraints):
    """(B, M, C) int32: for candidates `ids` (B, M, L+1) whose last piece is
    at position `step + 1` (position 0 is BOS), the length of the longest
    start of each phrase (B, C, P) that their output ends with; a phrase's
    full length where the output ends with the whole phrase."""
    pieces = tf.shape(constraints)[2]
    j = tf.range(pieces)[:, None]  # suffix length - 1
    i = tf.range(pieces)[None, :]  # position within the suffix
    positions = step + 1 - j + i  # (P, P): where the suffix of length j + 1 has its i-th piece
    inside = i <= j  # (P, P): the suffix's pieces
    window = tf.gather(ids, tf.clip_by_value(positions, 0, tf.shape(ids)[2] - 1), axis=2)  # (B, M, P, P)
    equal = tf.equal(window[:, :, None], constraints[:, None, :, None, :])  # (B, M, C, P, P)
    suffix = tf.range(pieces)  # j
    within = (suffix < step + 1)[None, None, None, :]  # the output has at least j + 1 pieces
    long_enough = suffix[None, None, :] < phrase_lengths(constraints)[:, None, :, None]  # (B, 1, C, P)
    matched = tf.reduce_all(tf.logical_or(equal, tf.logical_not(inside)), axis=-1)  # (B, M, C, P)
    matched = matched & within & long_enough
    lengths = tf.where(matched, suffix + 1, 0)  # (B, M, C, P)
    return tf.reduce_max(tf.concat([tf.zeros_like(lengths[..., :1]), lengths], axis=-1), axis=-1)


def _rank_within_bank(scores, banks):
    """(B, M) int32: each candidate's place among the candidates of its bank,
    best score first, the earlier candidate first among equals (as top_k)."""
    m = tf.shape(scores)[1]
    earlier = tf.range(m)[None, :, None] > tf.range(m)[None, None, :]  # (1, M, M): j before i
    better = tf.logical_or(scores[:, None, :] > scores[:, :, None],
                           tf.logical_and(tf.equal(scores[:, None, :], scores[:, :, None]), earlier))
    same_bank = tf.equal(banks[:, None, :], banks[:, :, None])  # (B, M, M)
    return tf.reduce_sum(tf.cast(tf.logical_and(better, same_bank), tf.int32), axis=2)


def _first_of_equals(keys, valid):
    """(B, M) bool: `valid` candidates whose key no earlier valid candidate has."""
    m = tf.shape(keys)[1]
    earlier = tf.range(m)[None, :, None] > tf.range(m)[None, None, :]  # (1, M, M): j before i
    repeated = tf.reduce_any(tf.equal(keys[:, None, :], keys[:, :, None]) & earlier & valid[:, None, :], axis=2)
    return tf.logical_and(valid, tf.logical_not(repeated))


def _forced(log_probs, step, state, ending):
    """(B, K, V) log-probabilities with the prefix forced and EOS barred
    where constraints are unmet (`ending` phrases are met by EOS), both only
    before a sentence's limit."""
    vocab = tf.shape(log_probs)[2]
    before_limit = (step + 1 < state.limits)[:, None, None]  # (B, 1, 1)
    prefixes = state.prefixes  # at least one column (`constrained_beam_decode`)
    in_prefix = step < phrase_lengths(prefixes)  # (B,)
    prefix_piece = tf.gather(prefixes, tf.minimum(step, tf.shape(prefixes)[1] - 1), axis=1)  # (B,)
    only_prefix = tf.equal(tf.range(vocab)[None, None, :], prefix_piece[:, None, None])  # (B, 1, V)
    force = tf.logical_and(in_prefix[:, None, None], before_limit)
    log_probs = tf.where(tf.logical_and(force, tf.logical_not(only_prefix)), NEG_INF, log_probs)
    unmet = tf.logical_not(tf.reduce_all(state.alive_met | ending, axis=2))[:, :, None]  # (B, K, 1)
    is_eos = tf.equal(tf.range(vocab), EOS_ID)[None, None, :]
    return tf.where(unmet & is_eos & before_limit, NEG_INF, log_probs)


def _candidates(state, live, k, vocab, progress, ending):
    """(beams, tokens, scores), each (B, M): beam search's best 2K
    continuations of the `live` (B, K, V) scores, then each live beam's next
    piece of every phrase it has not met (where `progress` (B, K, C) has
    got to in it, or its start), then, for a sentence with constraints,
    each beam's best non-EOS piece. A (beam, piece) that comes again, or
    a slot with nothing to offer, scores NEG_INF."""
    constraints = state.constraints
    batch, phrases = tf.shape(live)[0], tf.shape(constraints)[1]
    lengths = phrase_lengths(constraints)  # (B, C)
    _, top_indices = top_k(tf.reshape(live, [batch, k * vocab]), 2 * k)  # (B, 2K)
    done = state.alive_met | ending  # (B, K, C): met, or complete
    progress = tf.where(done, 0, tf.minimum(progress, tf.maximum(lengths[:, None, :] - 1, 0)))
    tiled = tf.broadcast_to(constraints[:, None], [batch, k, phrases, tf.shape(constraints)[2]])
    next_pieces = tf.gather(tiled, progress, axis=3, batch_dims=3)  # (B, K, C)
    not_eos = tf.where(tf.equal(tf.range(vocab), EOS_ID)[None, None, :], NEG_INF, live)
    best_pieces = tf.argmax(not_eos, axis=2, output_type=tf.int32)  # (B, K)
    own_beams = tf.broadcast_to(tf.range(k)[None, :, None], [batch, k, phrases])
    beams = tf.concat([top_indices // vocab, tf.reshape(own_beams, [batch, -1]),
                       tf.broadcast_to(tf.range(k)[None, :], [batch, k])], axis=1)  # (B, M)
    tokens = tf.concat([top_indices % vocab, tf.reshape(next_pieces, [batch, -1]), best_pieces], axis=1)  # (B, M)
    constrained = tf.reduce_any(lengths > 0, axis=1)[:, None]  # (B, 1)
    valid = tf.concat([tf.ones_like(top_indices, tf.bool), tf.reshape(tf.logical_not(done), [batch, -1]),
                       tf.broadcast_to(constrained, [batch, k])], axis=1)  # (B, M)
    valid = _first_of_equals(beams * vocab + tokens, valid)  # each (beam, piece) once: later copies dropped
    scores = tf.gather_nd(live, tf.stack([beams, tokens], axis=2), batch_dims=1)  # (B, M)
    return beams, tokens, tf.where(valid, scores, NEG_INF)


def _met(state, cand_beams, cand_tokens, cand_ids, step, ending, continues_word):
    """(confirmed, met), each (B, M, C) bool, and the banks (B, M) int32 of
    the candidates `cand_ids` (B, M, L+1): the phrases each has met for
    good (a complete phrase once the next piece closes its word), those it
    has met or completed, and the constraint pieces it has produced."""
    lengths = phrase_lengths(state.constraints)[:, None, :]  # (B, 1, C)
    reached = phrase_progress(cand_ids, step, state.constraints)  # (B, M, C)
    closes = tf.ones_like(cand_tokens, tf.bool) if continues_word is None else \
        tf.logical_not(tf.gather(continues_word, cand_tokens))  # (B, M)
    confirmed = (tf.gather(state.alive_met, cand_beams, batch_dims=1)
                 | (tf.gather(ending, cand_beams, batch_dims=1) & closes[:, :, None]))  # (B, M, C)
    met = confirmed | (tf.equal(reached, lengths) & (lengths > 0))
    return confirmed, met, tf.reduce_sum(tf.where(met, lengths, reached), axis=2)


def _dealt_round_banks(alive_scores, banks, most, k):
    """(B, K) the candidates kept alive: dealt round the banks (B, M), best
    bank first (`most` (B, 1) is a sentence's highest), then, by score, the
    impossible ones (NEG_INF), which a beam takes only for want of others."""
    order = _rank_within_bank(alive_scores, banks) * (most + 1) + (most - banks)  # (B, M): smaller first
    last_places = (tf.shape(banks)[1] + 1) * (most + 1) + _rank_within_bank(alive_scores, tf.zeros_like(banks))
    order = tf.where(alive_scores <= NEG_INF / 2, last_places, order)
    return tf.math.top_k(-order, k=k)[1]


def _constrained_step(state, log_probs, step, alpha, k, vocab, progress, ending, continues_word=None):
    """The new state from (B, K, V) next-token log-probabilities (prefix and
    EOS already forced), and (B*K,) the old beam row each new live beam
    continues. `progress` (B, K, C): `phrase_progress` of the live beams;
    `ending`: where that is a whole phrase; `continues_word`: None or (V,) bool."""
    beams = state.beams
    live = beams.alive_log_probs[:, :, None] + log_probs  # (B, K, V)
    cand_beams, cand_tokens, cand_scores = _candidates(state, live, k, vocab, progress, ending)  # (B, M)
    cand_ids = search.written_at(tf.gather(beams.alive_ids, cand_beams, batch_dims=1), step, cand_tokens)
    confirmed, met, banks = _met(state, cand_beams, cand_tokens, cand_ids, step, ending, continues_word)
    all_met = tf.reduce_all(met, axis=2)  # (B, M)

    ended = tf.equal(cand_tokens, EOS_ID)  # (B, M)
    rank = tf.range(tf.shape(cand_tokens)[1])[None, :]
    # Beam search's finishing rule (EOS among the best K); on the first step after a prefix only the
    # best candidate may end, as in CTranslate2, whose `target_prefix` does so against a short output
    # that ranks high only for want of a length penalty (its issue #277).
    after_prefix = tf.equal(phrase_lengths(state.prefixes), step) & (step > 0)  # (B,)
    finishes = ended & (rank < tf.where(after_prefix, 1, k)[:, None])

    alive_scores = tf.where(ended, NEG_INF, cand_scores)
    most = tf.reduce_sum(phrase_lengths(state.constraints), axis=1)[:, None]  # (B, 1)
    alive_pick = _dealt_round_banks(alive_scores, banks, most, k)  # (B, K)
    source_beams = tf.gather(cand_beams, alive_pick, batch_dims=1)
    beam_rows = tf.reshape(source_beams + tf.range(tf.shape(cand_beams)[0])[:, None] * k, [-1])  # (B*K,)

    # Finished: those that ended now join the kept ones, ranked met first, then by score.
    new_scores = tf.where(finishes, cand_scores / search.length_penalty(step + 1, alpha), NEG_INF)  # (B, M)
    new_keys = tf.where(finishes & tf.logical_not(all_met), new_scores - UNMET_PENALTY, new_scores)
    _, finished_pick = tf.math.top_k(tf.concat([state.finished_keys, new_keys], axis=1), k=k)  # (B, K)

    def kept(old, new):
        return tf.gather(tf.concat([old, new], axis=1), finished_pick, batch_dims=1)

    beams = search.BeamState(
        alive_ids=tf.gather(cand_ids, alive_pick, batch_dims=1),
        alive_log_probs=tf.gather(alive_scores, alive_pick, batch_dims=1),
        finished_ids=kept(beams.finished_ids, cand_ids),
        finished_scores=kept(beams.finished_scores, new_scores),
        finished_flags=kept(beams.finished_flags, finishes),
        limits=beams.limits)
    return state._replace(beams=beams, alive_met=tf.gather(confirmed, alive_pick, batch_dims=1),
                          finished_met=kept(state.finished_met, all_met),
                          finished_keys=kept(state.finished_keys, new_keys)), beam_rows


def constrained_beam_decode(tokens_to_logits, cache, beam_size, alpha, limits, loop_length, constraints, prefixes,
                            n_best=1, drop_finished=True, guard=None, continues_word=None):
    """`search.beam_decode` whose outputs contain each sentence's phrases and
    start with its prefix (see the module docstring).

    constraints: (B, C, P) int32 pieces, PAD-padded; prefixes: (B, Q) int32,
    PAD-padded. `limits` must already hold each prefix and its EOS.
    continues_word: None, or (V,) bool: the pieces after which a completed
    phrase is not met (see the module docstring).
    Returns `search.Hypotheses` as beam search does, best first: those that
    met every phrase before those that did not.
    """
    k = beam_size
    beams = search.initial_beams(limits, k, loop_length)
    batch = tf.shape(limits)[0]
    # At least one (PAD) piece per phrase and prefix, so that a piece can always be looked up.
    constraints = tf.pad(constraints, [[0, 0], [0, 0], [0, tf.maximum(1 - tf.shape(constraints)[2], 0)]])
    prefixes = tf.pad(prefixes, [[0, 0], [0, tf.maximum(1 - tf.shape(prefixes)[1], 0)]])
    empty = tf.equal(phrase_lengths(constraints), 0)  # (B, C)
    state = ConstrainedState(beams, tf.tile(empty[:, None, :], [1, k, 1]), tf.zeros([batch, k], tf.bool),
                             tf.fill([batch, k], NEG_INF), constraints, prefixes)

    def advance(step, state, cache):
        log_probs, vocab, cache = search.beam_log_probs(tokens_to_logits, state.beams.alive_ids, cache, step, k,
                                                        guard)
        # Where each live beam is in each phrase, and which phrases its output ends with.
        progress = phrase_progress(state.beams.alive_ids, step - 1, state.constraints)  # (B, K, C)
        lengths = phrase_lengths(state.constraints)[:, None, :]
        ending = tf.equal(progress, lengths) & (lengths > 0)  # complete, met once the word closes
        log_probs = _forced(log_probs, step, state, ending)  # (B, K, V)
        log_probs = search.only_eos_at_limit(log_probs, step, state.limits, vocab)
        state, beam_rows = _constrained_step(state, log_probs, step, alpha, k, vocab, progress, ending,
                                             continues_word)
        return state, cache, beam_rows

    def done(step, state):
        # As beam search's: no live beam can beat the n-th finished hypothesis,
        # which met its constraints (before the limit, only those can end).
        beams = state.beams
        best_alive = tf.reduce_max(beams.alive_log_probs, axis=1) / search.length_penalty(beams.limits, alpha)
        nth = n_best - 1
        nth_finished = tf.where(beams.finished_flags[:, nth] & state.finished_met[:, nth],
                                beams.finished_scores[:, nth], NEG_INF)
        return tf.logical_or(nth_finished > best_alive, step >= beams.limits)

    def results(state):
        return search.beam_results(state.beams, alpha, loop_length)

    ids, scores = search.run_search(cache, state, advance, done, results, loop_length, k, drop_finished)
    return search.Hypotheses(ids[:, :n_best, 1:], scores[:, :n_best])


def prefix_limits(limits, loop_length, prefixes):
    """(limits, loop_length) raised where a prefix and its EOS would not fit."""
    limits = tf.maximum(limits, phrase_lengths(prefixes) + 1)
    return limits, tf.maximum(loop_length, tf.reduce_max(tf.concat([limits, [1]], axis=0)))


def constrained_search_graph(model, source_ids, constraints, prefixes, beam_size=PAPER_BEAM_SIZE,
                             alpha=PAPER_ALPHA, max_length=None, use_cache=True, n_best=1,
                             extra_length=search.DEFAULT_EXTRA_LENGTH, no_repeat_ngram_size=0,
                             repetition_penalty=1.0, continues_word=None):
    """`constrained_search` without its own tf.function, to call inside another one."""
    search.check_beam_settings(beam_size, n_best, alpha)
    guard = make_guard(no_repeat_ngram_size, repetition_penalty)
    limits, loop_length = search.output_limits(source_ids, max_length, extra_length)
    limits, loop_length = prefix_limits(limits, loop_length, prefixes)
    tokens_to_logits, cache = make_step(search.as_models(model), source_ids, loop_length, beam_size, use_cache)
    return constrained_beam_decode(tokens_to_logits, cache, beam_size, search.as_alpha(alpha), limits, loop_length,
                                   constraints, prefixes, n_best, guard=guard, continues_word=continues_word)


def constrained_search(model, source_ids, constraints, prefixes=None, beam_size=PAPER_BEAM_SIZE, alpha=PAPER_ALPHA,
                       max_length=None, use_cache=True, n_best=1, extra_length=search.DEFAULT_EXTRA_LENGTH,
                       no_repeat_ngram_size=0, repetition_penalty=1.0):
    """Constrained beam search of (B, S) source ids -> `search.Hypotheses`
    (B, n_best, L), (B, n_best), as `search.beam_search`.

    constraints: (B, C, P) int32 phrases' pieces, PAD-padded (C may be 0);
    prefixes: (B, Q) int32, PAD-padded, or None. Runs as a tf.function,
    traced once per model and settings.
    """
    search.check_beam_settings(beam_size, n_best, alpha)
    check_guards(no_repeat_ngram_size, repetition_penalty)
    source_ids = tf.convert_to_tensor(source_ids, tf.int32)
    if prefixes is None:
        prefixes = tf.zeros([tf.shape(source_ids)[0], 0], tf.int32)
    guards = (int(no_repeat_ngram_size), float(repetition_penalty))
    fn = search.compiled_search(
        model, ("constrained", beam_size, float(alpha), max_length, use_cache, n_best, extra_length, guards),
        lambda models, ids, phrases, starts: constrained_search_graph(
            models, ids, phrases, starts, beam_size, alpha, max_length, use_cache, n_best, extra_length, *guards),
        CONSTRAINED_SIGNATURE)
    return fn(source_ids, tf.convert_to_tensor(constraints, tf.int32), tf.convert_to_tensor(prefixes, tf.int32))
