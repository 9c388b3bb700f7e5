import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import decoding
from keras_transformer.decoding import search
from keras_transformer.decoding import step as decoding_step
from keras_transformer.decoding.step import StepCache
from keras_transformer.modeling.special_ids import EOS_ID, PAD_ID
from tests.conftest import random_ids, varied_tiny_model

RNG = np.random.default_rng(3)
SOURCE = random_ids(RNG, 4, 10, lengths=[10, 7, 3, 1])


def lengths(ids):
    """Output lengths up to and including EOS (or the full row)."""
    ids = np.asarray(ids)
    out = []
    for row in ids:
        eos = np.flatnonzero(row == EOS_ID)
        out.append(int(eos[0]) + 1 if len(eos) else int((row != PAD_ID).sum()))
    return np.array(out)


# A cache for step functions that keep no state.
NO_CACHE = StepCache(beams=[], sentences=[])


@pytest.fixture(scope="module")
def model():
    return varied_tiny_model()


def best(hypotheses):
    """(ids (B, L), scores (B,)) of the best hypotheses (B, N, L), (B, N)."""
    return np.asarray(hypotheses.ids)[:, 0], np.asarray(hypotheses.scores)[:, 0]


def best_ids(hypotheses):
    return best(hypotheses)[0]


@pytest.mark.parametrize("name", ["greedy", "beam", "beam_n_best", "sample"])
def test_every_search_returns_hypotheses_with_an_n_best_axis(model, name):
    run = {"greedy": lambda: decoding.greedy_search(model, SOURCE),
           "beam": lambda: decoding.beam_search(model, SOURCE),
           "beam_n_best": lambda: decoding.beam_search(model, SOURCE, n_best=3),
           "sample": lambda: decoding.sample_search(model, SOURCE, seed=1)}[name]
    result = run()
    n = 3 if name == "beam_n_best" else 1
    assert isinstance(result, search.Hypotheses)
    assert result.ids.shape[:2] == (4, n) and result.scores.shape == (4, n)
    assert result.ids.dtype == tf.int32 and result.scores.dtype == tf.float32
    assert np.all(np.asarray(result.scores) < 0)  # log-probabilities, every search


def test_random_model_produces_varied_outputs(model):
    ids = best_ids(decoding.greedy_search(model, SOURCE))
    assert len(np.unique(ids[ids > 3])) > 5  # the other tests are not comparing constant rows


def test_cached_step_logits_equal_the_full_decoder_pass(model):
    target = random_ids(RNG, 4, 8)
    full = np.asarray(model((SOURCE, target), training=False))
    tokens_to_logits, cache = decoding_step.incremental_step(model, tf.constant(SOURCE))
    for step in range(8):
        logits, cache = tokens_to_logits(tf.constant(target[:, step:step + 1]), cache, step)
        np.testing.assert_allclose(logits, full[:, step], atol=1e-5)


def test_greedy_cached_equals_uncached(model):
    cached, cached_scores = best(decoding.greedy_search(model, SOURCE, use_cache=True))
    uncached, uncached_scores = best(decoding.greedy_search(model, SOURCE, use_cache=False))
    np.testing.assert_array_equal(cached, uncached)
    np.testing.assert_allclose(cached_scores, uncached_scores, atol=1e-4)


def test_beam_cached_equals_uncached(model):
    ids_a, scores_a = decoding.beam_search(model, SOURCE, n_best=2, use_cache=True)
    ids_b, scores_b = decoding.beam_search(model, SOURCE, n_best=2, use_cache=False)
    np.testing.assert_array_equal(ids_a, ids_b)
    np.testing.assert_allclose(scores_a, scores_b, atol=1e-4)


def test_beam_one_without_length_penalty_is_greedy(model):
    ids, _ = best(decoding.beam_search(model, SOURCE, beam_size=1, alpha=0.0))
    np.testing.assert_array_equal(ids, best_ids(decoding.greedy_search(model, SOURCE)))


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_beam_scores_are_length_penalised_log_probabilities(model, alpha):
    ids, scores = best(decoding.beam_search(model, SOURCE, beam_size=3, alpha=alpha))
    n = lengths(ids)
    target_in = np.concatenate([np.full((4, 1), 2), ids[:, :-1]], axis=1).astype("int32")  # BOS + output
    log_probs = tf.nn.log_softmax(model((SOURCE, target_in), training=False)).numpy()
    for row in range(4):
        total = sum(log_probs[row, t, ids[row, t]] for t in range(n[row]))
        assert float(scores[row]) == pytest.approx(total / ((5 + n[row]) / 6) ** alpha, abs=1e-3)


def test_beam_search_never_scores_below_greedy_under_its_own_objective(model):
    _, greedy_scores = best(decoding.beam_search(model, SOURCE, beam_size=1, alpha=0.6))
    _, beam_scores = best(decoding.beam_search(model, SOURCE, beam_size=4, alpha=0.6))
    assert (np.asarray(beam_scores) >= np.asarray(greedy_scores) - 1e-4).all()


def test_output_never_exceeds_source_length_plus_50(model):
    source_lengths = (SOURCE != PAD_ID).sum(axis=1)
    for result in (decoding.greedy_search(model, SOURCE), decoding.beam_search(model, SOURCE)):
        ids = best_ids(result)
        assert (lengths(ids) <= source_lengths + 50).all()
        assert ids.shape[1] == source_lengths.max() + 50
    capped = best_ids(decoding.beam_search(model, SOURCE, max_length=5))
    assert (lengths(capped) <= 5).all()


def test_n_best_is_sorted_and_starts_with_the_one_best(model):
    one_best, one_best_score = best(decoding.beam_search(model, SOURCE, beam_size=4))
    ids, scores = decoding.beam_search(model, SOURCE, beam_size=4, n_best=3)
    assert tuple(ids.shape[:2]) == (4, 3)
    scores = np.asarray(scores)
    assert (np.diff(scores, axis=1) <= 1e-6).all()
    np.testing.assert_array_equal(np.asarray(ids)[:, 0], one_best)
    np.testing.assert_allclose(scores[:, 0], one_best_score, atol=1e-5)


def test_each_sentence_decodes_as_it_would_alone(model):
    batch_ids = best_ids(decoding.beam_search(model, SOURCE))
    for row in range(4):
        alone = SOURCE[row:row + 1, : max(1, (SOURCE[row] != PAD_ID).sum())]
        ids = best_ids(decoding.beam_search(model, alone))
        n = lengths(ids)[0]
        np.testing.assert_array_equal(np.asarray(ids)[0, :n], np.asarray(batch_ids)[row, :n])


def test_bad_arguments_are_named():
    model = varied_tiny_model()
    with pytest.raises(ValueError, match="n_best must be in \\[1, beam_size=2\\]; got 3"):
        decoding.beam_search(model, SOURCE, beam_size=2, n_best=3)
    with pytest.raises(ValueError, match="beam_size must be at least 1; got 0"):
        decoding.beam_search(model, SOURCE, beam_size=0)


# ------------------------------------------------------------------ sampling
def fixed_distribution(logits):
    """A tokens_to_logits that ignores its input and returns the same (V,) logits every step."""
    logits = tf.constant(logits, tf.float32)

    def tokens_to_logits(ids, cache, step):
        return tf.tile(logits[None, :], [tf.shape(ids)[0], 1]), cache

    return tokens_to_logits


def first_tokens(logits, rows, seed=0, **settings):
    """The first sampled token of `rows` rows from a fixed distribution, in one batch."""
    limits = tf.fill([rows], 5)
    ids, _ = search.sequential_decode(fixed_distribution(logits), NO_CACHE, limits, tf.constant(5),
                                      search.sampler(seed, **settings), drop_finished=False)
    return np.asarray(ids)[:, 0, 0]


LOGITS = np.log([0.0001, 0.0001, 0.0001, 0.0001, 0.4, 0.3, 0.15, 0.1, 0.04, 0.0096]).astype("float32")


def test_samples_follow_the_softmax():
    """20,000 draws (fixed seed): each token's frequency is within 4.5
    standard errors of its softmax probability, and a chi-square statistic
    stays below the 0.999 quantile for these degrees of freedom."""
    draws = first_tokens(LOGITS, 20000, seed=11)
    probs = np.exp(LOGITS) / np.exp(LOGITS).sum()
    counts = np.bincount(draws, minlength=len(probs))
    expected = probs * len(draws)
    standard_error = np.sqrt(len(draws) * probs * (1 - probs))
    assert np.all(np.abs(counts - expected) <= 4.5 * standard_error + 1), (counts, expected)
    big = expected >= 5
    chi_square = (((counts - expected) ** 2) / expected)[big].sum()
    assert chi_square < 27.9  # chi-square 0.999 quantile, 9 degrees of freedom (at most 9 cells kept here)


def test_top_k_never_leaves_the_top_k_and_top_p_keeps_the_nucleus():
    draws = first_tokens(LOGITS, 5000, seed=3, top_k=2)
    assert set(draws) == {4, 5}  # both top-2 tokens drawn, nothing else
    counts = np.bincount(draws, minlength=6)
    np.testing.assert_allclose(counts[4] / 5000, 0.4 / 0.7, atol=0.03)  # renormalised over the top 2
    draws = first_tokens(LOGITS, 5000, seed=3, top_p=0.8)
    assert set(draws) == {4, 5, 6}  # 0.4 + 0.3 < 0.8 <= 0.4 + 0.3 + 0.15
    assert set(first_tokens(LOGITS, 500, seed=3, top_p=0.3)) == {4}  # the first always stays


def test_low_temperature_sampling_is_greedy(model):
    greedy = best_ids(decoding.greedy_search(model, SOURCE))
    ids, scores = best(decoding.sample_search(model, SOURCE, seed=5, temperature=1e-4, alpha=0.0))
    np.testing.assert_array_equal(ids, greedy)
    # Scores are the model's own log-probabilities of the chosen tokens: beam 1, alpha 0's.
    _, beam_scores = best(decoding.beam_search(model, SOURCE, beam_size=1, alpha=0.0))
    np.testing.assert_allclose(scores, beam_scores, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_scores_mean_one_thing_in_every_search(model, alpha):
    """Greedy search, beam 1 and sampling near temperature 0: each one's
    scores are the teacher-forced log-probability of its own output over the
    length penalty at alpha (score.py's "normalized" column), and `log_probs`
    gives back the summed log-probability (its "log_prob" column)."""
    from keras_transformer.decoding import scoring

    searches = {"greedy": decoding.greedy_search(model, SOURCE, alpha=alpha),
                "beam 1": decoding.beam_search(model, SOURCE, beam_size=1, alpha=alpha),
                "sample": decoding.sample_search(model, SOURCE, seed=5, temperature=1e-4, alpha=alpha)}
    for name, hypotheses in searches.items():
        ids, scores = best(hypotheses)
        targets = np.where(ids == EOS_ID, PAD_ID, ids)  # pieces without EOS, as score_ids takes them
        expected = scoring.score_ids(model, SOURCE, targets, alpha)
        np.testing.assert_allclose(scores, expected["normalized"], rtol=1e-4, atol=1e-4, err_msg=name)
        np.testing.assert_allclose(np.asarray(search.log_probs(hypotheses, alpha))[:, 0], expected["log_prob"],
                                   rtol=1e-4, atol=1e-4, err_msg=name)
    np.testing.assert_array_equal(best_ids(searches["sample"]), best_ids(searches["greedy"]))
    np.testing.assert_allclose(best(searches["sample"])[1], best(searches["greedy"])[1], rtol=1e-5)
    if alpha == 0.0:  # beam 1 keeps greedy's path when nothing rewards length
        np.testing.assert_array_equal(best_ids(searches["beam 1"]), best_ids(searches["greedy"]))
        np.testing.assert_allclose(best(searches["beam 1"])[1], best(searches["greedy"])[1], rtol=1e-5)


def test_sampling_is_seeded_and_respects_the_length_limits(model):
    a = best_ids(decoding.sample_search(model, SOURCE, seed=1))
    b = best_ids(decoding.sample_search(model, SOURCE, seed=1))
    c = best_ids(decoding.sample_search(model, SOURCE, seed=2))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    source_lengths = (SOURCE != 0).sum(axis=1)
    assert np.all(lengths(a) <= source_lengths + 50)
    capped = best_ids(decoding.sample_search(model, SOURCE, seed=1, extra_length=3))
    assert np.all(lengths(capped) <= source_lengths + 3) and np.all(np.asarray(capped)[:, :1] > 0)


@pytest.mark.parametrize("settings,message", [
    ({"top_k": -1}, r"top-k must be a whole number >= 0 \(0: the full distribution\); got -1"),
    ({"top_p": 0.0}, r"top-p must be in \(0, 1\]; got 0.0"),
    ({"top_p": 1.5}, r"top-p must be in \(0, 1\]; got 1.5"),
    ({"temperature": 0.0}, r"temperature must be > 0; got 0.0"),
])
def test_bad_sampling_settings_are_named(model, settings, message):
    with pytest.raises(ValueError, match=message):
        decoding.sample_search(model, SOURCE, **settings)


# ------------------------------------------------------------------ ensembles
def test_an_ensemble_of_one_is_the_model(model):
    np.testing.assert_array_equal(decoding.greedy_search([model], SOURCE).ids, decoding.greedy_search(model, SOURCE).ids)
    ids, scores = decoding.beam_search([model], SOURCE)
    expected_ids, expected_scores = decoding.beam_search(model, SOURCE)
    np.testing.assert_array_equal(ids, expected_ids)
    np.testing.assert_allclose(scores, expected_scores, rtol=1e-6)


@pytest.mark.slow
def test_an_ensemble_of_two_copies_is_the_model(model):
    """Two members with their own caches but equal weights: the mean of equal
    probabilities is that probability, so every search and score is unchanged."""
    copy = varied_tiny_model()  # same seed, so the same weights, but another object and cache
    np.testing.assert_array_equal(decoding.greedy_search([model, copy], SOURCE).ids,
                                  decoding.greedy_search(model, SOURCE).ids)
    ids, scores = decoding.beam_search([model, copy], SOURCE, n_best=2)
    expected_ids, expected_scores = decoding.beam_search(model, SOURCE, n_best=2)
    np.testing.assert_array_equal(ids, expected_ids)
    np.testing.assert_allclose(scores, expected_scores, rtol=1e-5, atol=1e-5)
    sampled = decoding.sample_search([model, copy], SOURCE, seed=9).ids
    np.testing.assert_array_equal(sampled, decoding.sample_search(model, SOURCE, seed=9).ids)


def test_an_ensemble_averages_the_members_probabilities(model):
    """One step of a two-model ensemble is log((p1 + p2) / 2), from the two members' own caches."""
    other = varied_tiny_model(seed=1)
    source = tf.constant(SOURCE)
    step_ids = tf.fill([4, 1], 2)
    combined, cache = decoding_step.make_step([model, other], source, 8)
    got, cache = combined(step_ids, cache, 0)
    probs = [tf.nn.softmax(decoding_step.incremental_step(m, source)[0](
        step_ids, decoding_step.incremental_step(m, source)[1], 0)[0]) for m in (model, other)]
    np.testing.assert_allclose(got, np.log((probs[0] + probs[1]) / 2), atol=1e-5)
    assert len(cache.beams) == len(cache.sentences) == 2  # each member's own


def test_ensemble_members_must_share_the_vocabulary(model):
    import keras_transformer as kt

    other = kt.Transformer.from_preset("tiny", vocab_size=70)
    other.build()
    with pytest.raises(ValueError, match=r"share their vocabularies; got .*\(61, 61\), \(70, 70\)"):
        decoding.beam_search([model, other], SOURCE)
    with pytest.raises(ValueError, match="at least one model"):
        decoding.greedy_search([], SOURCE)


def test_greedy_scores_are_the_beam_one_scores_without_length_penalty(model):
    beam_ids, beam_scores = decoding.beam_search(model, SOURCE, beam_size=1, alpha=0.0)
    ids, scores = tf.function(lambda s: decoding.greedy_search_graph(model, s, alpha=0.0))(tf.constant(SOURCE))
    np.testing.assert_array_equal(ids, beam_ids)
    np.testing.assert_allclose(scores, beam_scores, atol=1e-4)


def test_the_compiled_search_cache_frees_a_model_nobody_else_holds():
    import gc
    import weakref

    model = varied_tiny_model(seed=5)
    decoding.greedy_search(model, SOURCE)
    decoding.beam_search(model, SOURCE, beam_size=2)
    assert model in search._compiled
    freed = weakref.ref(model)
    del model
    gc.collect()
    assert freed() is None


@pytest.mark.slow
def test_a_dead_ensemble_member_is_never_mistaken_for_a_new_model():
    import gc
    import weakref

    first, second = varied_tiny_model(seed=6), varied_tiny_model(seed=7)
    decoding.greedy_search([first, second], SOURCE)
    freed = weakref.ref(second)
    del second
    gc.collect()
    assert freed() is None  # the cache held no reference to it
    third = varied_tiny_model(seed=8)
    got = decoding.greedy_search([first, third], SOURCE)
    expected = tf.function(lambda s: decoding.greedy_search_graph([first, third], s))(tf.constant(SOURCE))
    np.testing.assert_array_equal(got.ids, expected.ids)
    # The dead member's entry is gone; what is left names live models only.
    assert all(ref() is not None for key in search._compiled[first] for ref in key[0])


@pytest.mark.parametrize("search_name", ["greedy", "beam", "beam_n_best"])
def test_max_length_caps_the_outputs_and_leaves_shorter_ones_alone(model, search_name):
    """60 = the longest source (10) + 50, so that cap binds no sentence; 6 binds most."""
    def run(**kwargs):
        if search_name == "greedy":
            return decoding.greedy_search(model, SOURCE, **kwargs)
        n_best = 3 if search_name == "beam_n_best" else 1
        return decoding.beam_search(model, SOURCE, beam_size=4, alpha=0.6, n_best=n_best, **kwargs)

    free, loose, tight = run(), run(max_length=60), run(max_length=6)
    np.testing.assert_array_equal(free.ids, loose.ids)
    np.testing.assert_array_equal(free.scores, loose.scores)
    assert np.asarray(tight.ids).shape[2] == 6
    assert all((lengths(row) <= 6).all() for row in np.asarray(tight.ids))


def test_decode_next_grows_the_cache_by_the_tokens_it_is_given(model):
    target = random_ids(RNG, 4, 6)
    full = np.asarray(model((SOURCE, target), training=False))
    cache = model.init_cache(model.encode(SOURCE))
    logits, cache = model.decode_next(target[:, :2], SOURCE, cache)  # two at once: causal among themselves
    assert cache[0]["self"][0].shape[2] == 2
    real = target[:, :2] != 0
    np.testing.assert_allclose(np.asarray(logits)[real], full[:, :2][real], atol=1e-5)
    for t in range(2, 6):
        logits, cache = model.decode_next(target[:, t:t + 1], SOURCE, cache)
        real = target[:, t] != 0
        np.testing.assert_allclose(np.asarray(logits)[real, 0], full[real, t], atol=1e-5)
    assert cache[0]["self"][0].shape[2] == 6


# ------------------------------------------------------------------ finished sentences leave the batch
def scripted_model(rows_seen, rows_per_sentence, vocab=8):
    """A tokens_to_logits whose rows end at their own lengths: the cache holds
    each sentence's output length (a sentence entry);
    until that step the sentence's rows prefer token 4 (p 0.5) over 5 and 6,
    then EOS (p 0.9). `rows_seen` adds up the rows of every step."""
    before = np.full(vocab, 1e-4)
    before[[4, 5, 6]] = [0.5, 0.3, 0.2]
    at_end = np.full(vocab, 1e-4)
    at_end[[EOS_ID, 4]] = [0.9, 0.1]
    before, at_end = tf.constant(np.log(before), tf.float32), tf.constant(np.log(at_end), tf.float32)

    def tokens_to_logits(ids, cache, step):
        rows_seen.assign_add(tf.shape(ids)[0])
        ends = tf.equal(tf.repeat(cache.sentences[:, 0], rows_per_sentence), step + 1)  # (rows,)
        tf.debugging.assert_equal(tf.shape(ends)[0], tf.shape(cache.beams)[0])
        return tf.where(ends[:, None], at_end[None, :], before[None, :]), cache

    return tokens_to_logits


def run_scripted(search_fn, lengths, rows_per_sentence=1, **kwargs):
    """(outputs, rows decoded) of a search over the scripted model, the batch's
    sentences ending at `lengths`."""
    rows_seen = tf.Variable(0)
    rows = len(lengths) * rows_per_sentence
    cache = StepCache(beams=tf.zeros([rows, 2]), sentences=tf.constant(np.asarray(lengths, np.int32)[:, None]))

    @tf.function
    def run():
        limits = tf.fill([len(lengths)], 20)
        return search_fn(scripted_model(rows_seen, rows_per_sentence), cache, limits, tf.constant(20), **kwargs)

    outputs = tf.nest.map_structure(np.asarray, run())
    return outputs, int(rows_seen.numpy())


def test_greedy_drops_each_sentence_when_it_ends_and_keeps_the_order():
    lengths = [3, 1, 2]
    def greedy(tokens_to_logits, cache, limits, loop_length, drop_finished):
        return search.sequential_decode(tokens_to_logits, cache, limits, loop_length, search.arg_max, drop_finished)

    dropped, dropped_rows = run_scripted(greedy, lengths, drop_finished=True)
    kept, kept_rows = run_scripted(greedy, lengths, drop_finished=False)
    np.testing.assert_array_equal(dropped.ids, kept.ids)
    np.testing.assert_array_equal(dropped.scores, kept.scores)
    np.testing.assert_array_equal(dropped.ids[:, 0, :3],
                                  [[4, 4, EOS_ID], [EOS_ID, PAD_ID, PAD_ID], [4, EOS_ID, PAD_ID]])
    assert (kept_rows, dropped_rows) == (9, 3 + 2 + 1)


def test_beam_search_drops_done_sentences_without_changing_their_hypotheses():
    ends = [4, 1, 3, 2]

    def beam(tokens_to_logits, cache, limits, loop_length, **kwargs):
        return search.beam_decode(tokens_to_logits, cache, 2, 0.6, limits, loop_length, n_best=2, **kwargs)

    (ids, scores), dropped_rows = run_scripted(beam, ends, 2, drop_finished=True)
    (kept_ids, kept_scores), kept_rows = run_scripted(beam, ends, 2, drop_finished=False)
    np.testing.assert_array_equal(ids, kept_ids)
    np.testing.assert_allclose(scores, kept_scores, rtol=1e-6)
    np.testing.assert_array_equal(lengths(ids[:, 0]), ends)  # each best ends where scripted
    assert dropped_rows < kept_rows


@pytest.mark.parametrize("drop_finished", [False, True])
def test_beam_search_ends_each_sentence_at_its_own_length_limit(drop_finished):
    """EOS is all but impossible, so every best hypothesis runs to its limit,
    where the search allows only EOS; the limits differ, so at some steps
    only some sentences of the batch are at theirs."""
    logits = np.full(8, -50.0, np.float32)
    logits[[4, 5]] = [0.0, -1.0]
    log_probs = logits - np.log(np.exp(logits.astype(np.float64)).sum())
    limits = [2, 5, 3]

    def run():
        return search.beam_decode(fixed_distribution(logits), NO_CACHE, 2, 0.6, tf.constant(limits), tf.constant(5),
                                  drop_finished=drop_finished)

    ids, scores = (np.asarray(x) for x in tf.function(run)())
    for row, limit in enumerate(limits):
        np.testing.assert_array_equal(ids[row, 0], [4] * (limit - 1) + [EOS_ID] + [PAD_ID] * (5 - limit))
        expected = ((limit - 1) * log_probs[4] + log_probs[EOS_ID]) / ((5.0 + limit) / 6.0) ** 0.6
        np.testing.assert_allclose(scores[row, 0], expected, rtol=1e-5)


def test_beam_search_stops_once_its_n_best_can_no_longer_change():
    """Step 1 offers EOS (p 0.6) and token 4 (p 0.4). Without length penalty no
    continuation of "4" can beat "EOS", so the 1-best search is done after one
    step; the 2-best one goes on until a second hypothesis finishes."""
    probs = np.full(8, 1e-4)
    probs[[EOS_ID, 4]] = [0.6, 0.4]
    probs /= probs.sum()

    def first_step_logits(ids, cache, step):
        first = tf.constant(np.log(probs), tf.float32)
        calls.assign_add(1)
        return tf.tile(first[None, :], [tf.shape(ids)[0], 1]), cache

    def run(n_best):
        calls.assign(0)
        out = tf.function(lambda: search.beam_decode(first_step_logits, NO_CACHE, 2, 0.0, tf.constant([9]),
                                                     tf.constant(9), n_best=n_best))()
        return out, int(calls.numpy())

    calls = tf.Variable(0)
    (one_ids, one_scores), one_steps = run(1)
    (two_ids, two_scores), two_steps = run(2)
    assert one_steps == 1 and two_steps > 1
    np.testing.assert_array_equal(one_ids[:, 0], two_ids[:, 0])
    np.testing.assert_allclose(one_scores[:, 0], [np.log(probs[EOS_ID])], rtol=1e-5)
    np.testing.assert_allclose(two_scores[:, 0], one_scores[:, 0])
