import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import decoding
from keras_transformer.decoding import constrained
from keras_transformer.modeling.special_ids import EOS_ID, PAD_ID
from tests.conftest import random_ids, varied_tiny_model
from tests.decoding.test_search import NO_CACHE, fixed_distribution

RNG = np.random.default_rng(5)
SOURCE = random_ids(RNG, 4, 10, lengths=[10, 7, 3, 1])


@pytest.fixture(scope="module")
def model():
    return varied_tiny_model()


def phrases(rows, width=None):
    """(B, C, P) int32 from one list of phrases (lists of ids) per sentence, PAD-padded."""
    count = max([len(row) for row in rows] + [0])
    width = width or max([len(p) for row in rows for p in row] + [1])
    out = np.full((len(rows), count, width), PAD_ID, np.int32)
    for b, row in enumerate(rows):
        for c, phrase in enumerate(row):
            out[b, c, :len(phrase)] = phrase
    return out


def output(ids):
    """A row of output ids up to (not including) EOS, as a list."""
    ids = list(np.asarray(ids))
    return ids[:ids.index(EOS_ID)] if EOS_ID in ids else [i for i in ids if i != PAD_ID]


def contains(sequence, phrase):
    return any(sequence[i:i + len(phrase)] == list(phrase) for i in range(len(sequence) - len(phrase) + 1))


@pytest.mark.parametrize("n_best", [1, 3])
def test_no_constraints_gives_beam_search_to_the_bit(model, n_best):
    expected = decoding.beam_search(model, SOURCE, n_best=n_best)
    for given in (np.zeros((4, 0, 0), np.int32), phrases([[[]], [[], []], [[]], [[]]])):
        got = constrained.constrained_search(model, SOURCE, given, n_best=n_best)
        np.testing.assert_array_equal(got.ids, expected.ids)
        np.testing.assert_array_equal(got.scores, expected.scores)


def test_unconstrained_sentences_of_a_constrained_batch_are_beam_searchs(model):
    expected = decoding.beam_search(model, SOURCE, n_best=2)
    got = constrained.constrained_search(model, SOURCE, phrases([[[7, 8]], [], [[9]], []]), n_best=2)
    for row in (1, 3):
        np.testing.assert_array_equal(got.ids[row], expected.ids[row])
        np.testing.assert_array_equal(got.scores[row], expected.scores[row])


def test_every_output_contains_its_phrases(model):
    # Phrases the unconstrained search does not produce, one to three pieces, one or two a sentence.
    plain = [output(row) for row in np.asarray(decoding.beam_search(model, SOURCE).ids)[:, 0]]
    rows = []
    for b in range(4):
        wanted = []
        for length in ([2, 1] if b % 2 else [3]):
            while True:
                phrase = list(RNG.integers(4, 61, size=length))
                if not contains(plain[b], phrase):
                    break
            wanted.append(phrase)
        rows.append(wanted)
    got = constrained.constrained_search(model, SOURCE, phrases(rows), extra_length=20)
    for b in range(4):
        out = output(got.ids[b, 0])
        assert np.asarray(got.ids[b, 0])[len(out)] == EOS_ID  # it ended, within its limit
        for phrase in rows[b]:
            assert contains(out, phrase), (b, out, phrase)


def test_a_hypothesis_ends_only_once_its_phrases_are_met(model):
    # Beam search ends sentence 3 (one source piece) within its limit; a phrase forces it on.
    plain = output(decoding.beam_search(model, SOURCE).ids[3, 0])
    phrase = [p for p in range(4, 61) if p not in plain][:2]
    got = constrained.constrained_search(model, SOURCE, phrases([[], [], [], [phrase]]), extra_length=20)
    out = output(got.ids[3, 0])
    assert contains(out, phrase) and out != plain


def test_a_phrase_that_cannot_fit_gives_the_best_output_at_the_limit(model):
    # A 12-piece phrase, and outputs of at most 5 pieces with EOS: no hypothesis can meet it.
    too_long = list(range(10, 22))
    got = constrained.constrained_search(model, SOURCE, phrases([[too_long]] * 4), max_length=5)
    ids, scores = np.asarray(got.ids), np.asarray(got.scores)
    assert ids.shape[2] == 5 and np.all(ids[:, 0, 4] == EOS_ID)  # ended at the limit, every sentence
    assert np.all(np.isfinite(scores)) and np.all(scores > -1e8)


@pytest.mark.slow
def test_forced_prefix_is_greedy_search_after_the_prefix_at_beam_1(model):
    prefix = [[11, 12, 13], [14], [], [15, 16]]
    padded = np.zeros((4, 3), np.int32)
    for b, p in enumerate(prefix):
        padded[b, :len(p)] = p
    got = constrained.constrained_search(model, SOURCE, np.zeros((4, 0, 0), np.int32), padded, beam_size=1,
                                         alpha=0.0)
    for b in range(4):
        # Reference: teacher-force the prefix, then the arg-max piece until EOS or the limit.
        limit = int((SOURCE[b] != PAD_ID).sum()) + decoding.search.DEFAULT_EXTRA_LENGTH
        produced, log_prob = [], 0.0
        while len(produced) < limit:
            target = np.array([[2] + produced], np.int32)
            logits = model((SOURCE[b:b + 1], target), training=False)[0, -1]
            log_probs = np.asarray(tf.nn.log_softmax(tf.cast(logits, tf.float32)))
            piece = prefix[b][len(produced)] if len(produced) < len(prefix[b]) else int(np.argmax(log_probs))
            if len(produced) + 1 == limit:
                piece = EOS_ID
            log_prob += log_probs[piece]
            produced.append(piece)
            if piece == EOS_ID:
                break
        ids = list(np.asarray(got.ids[b, 0])[:len(produced)])
        assert ids == produced
        np.testing.assert_allclose(float(got.scores[b, 0]), log_prob, rtol=1e-4)


def test_a_prefix_longer_than_the_limit_raises_the_limit(model):
    prefix = np.array([list(range(20, 34))] * 4, np.int32)  # 14 pieces; the limit allows 5 with EOS
    got = constrained.constrained_search(model, SOURCE, np.zeros((4, 0, 0), np.int32), prefix, max_length=5)
    ids = np.asarray(got.ids)
    np.testing.assert_array_equal(ids[:, 0, :14], prefix)
    assert np.all(ids[:, 0, 14] == EOS_ID)


def test_constraints_and_dropping_finished_sentences_agree(model):
    given = phrases([[[5, 6]], [[7]], [], [[8, 9], [10]]])
    limits, loop_length = decoding.search.output_limits(tf.constant(SOURCE), None, 12)
    results = []
    for drop in (True, False):
        tokens_to_logits, cache = decoding.step.make_step([model], tf.constant(SOURCE), loop_length, 4)
        results.append(constrained.constrained_beam_decode(
            tokens_to_logits, cache, 4, 0.6, limits, loop_length, tf.constant(given), tf.zeros([4, 1], tf.int32),
            n_best=2, drop_finished=drop))
    np.testing.assert_array_equal(results[0].ids, results[1].ids)
    np.testing.assert_allclose(results[0].scores, results[1].scores, atol=1e-5)


def test_phrase_progress_is_the_longest_start_the_output_ends_with():
    rng = np.random.default_rng(0)
    ids = rng.integers(4, 7, size=(3, 5, 9)).astype(np.int32)  # a small alphabet: many partial matches
    ids[:, :, 0] = 2  # BOS
    given = phrases([[[4, 5, 4], [6]], [[5, 5], []], [[4, 4, 4, 4], [6, 4]]])
    for step in range(8):  # the last piece sits at position step + 1
        got = np.asarray(constrained.phrase_progress(tf.constant(ids), step, tf.constant(given)))
        for b in range(3):
            for m in range(5):
                out = list(ids[b, m, 1:step + 2])
                for c in range(2):
                    phrase = [p for p in given[b, c] if p != PAD_ID]
                    want = max([j for j in range(1, len(phrase) + 1) if out[len(out) - j:] == phrase[:j]] + [0])
                    assert got[b, m, c] == want, (step, b, m, c)


def test_banks_rank_by_score_and_then_by_order():
    scores = tf.constant([[-1.0, -3.0, -1.0, -2.0, -0.5]])
    banks = tf.constant([[0, 1, 0, 1, 2]])
    np.testing.assert_array_equal(constrained._rank_within_bank(scores, banks), [[0, 1, 1, 0, 0]])


def test_a_phrase_is_met_only_when_the_next_piece_closes_its_word(model):
    # Every piece but the special ones continues a word here: only EOS can close a phrase, so it ends the output.
    continues_word = np.arange(61) > EOS_ID
    rows = [[[20, 21]], [[30]], [], [[40, 41, 42]]]
    got = constrained.constrained_search(model, SOURCE, phrases(rows), extra_length=20)
    free = [output(row) for row in np.asarray(got.ids)[:, 0]]
    assert any(not out[-len(p[0]):] == p[0] for out, p in zip(free, rows) if p)  # without the rule, it goes on
    fn = constrained.constrained_search_graph
    bounded = fn([model], tf.constant(SOURCE), tf.constant(phrases(rows)), tf.zeros([4, 0], tf.int32),
                 extra_length=20, continues_word=tf.constant(continues_word))
    for b, row in enumerate(rows):
        if row:
            assert output(bounded.ids[b, 0])[-len(row[0]):] == row[0]


def test_pieces_that_continue_a_word(tokenizer):
    continues = tokenizer.continues_word()
    processor_pieces = {i: tokenizer._op.id_to_string(i).numpy().decode() for i in range(tokenizer.vocab_size)}
    starts = [i for i, piece in processor_pieces.items() if piece.startswith("\u2581")]  # "▁": a word's start
    inside = [i for i, piece in processor_pieces.items() if piece.isalpha()]  # letters only: a word's middle
    punctuation = [i for i, piece in processor_pieces.items() if piece in {".", ",", "-", ":"}]
    assert starts and inside
    assert not continues[starts].any() and continues[inside].all() and not continues[punctuation].any()
    assert not continues[:4].any()  # PAD, UNK, BOS, EOS


def test_a_phrase_that_starts_another_does_not_block_it():
    # "Invest" (piece 20) and "Investition" (20, then 40, which continues a word): the first must also
    # appear as a word of its own. A fixed distribution: piece 7 likely, then EOS, the rest rare.
    logits = np.full(61, -4.0, np.float32)
    logits[7], logits[EOS_ID] = 2.0, 1.0
    continues_word = np.arange(61) > 30  # pieces 31-60 continue a word, 4-30 start one
    limits = tf.constant([12, 12])

    def run(continues):
        return constrained.constrained_beam_decode(
            fixed_distribution(logits), NO_CACHE, 4, 0.6, limits, tf.constant(12),
            tf.constant(phrases([[[20], [20, 40]], [[20, 40]]])), tf.zeros([2, 1], tf.int32),
            continues_word=continues)

    for continues in (None, tf.constant(continues_word)):
        out = [output(row) for row in np.asarray(tf.function(run)(continues).ids)[:, 0]]
        assert contains(out[0], [20, 40]) and contains(out[1], [20, 40]), out
        # With the rule, "20" counts only where the next piece starts a word (or the output ends).
        alone = [i for i, piece in enumerate(out[0]) if piece == 20 and (
            continues is None or i + 1 == len(out[0]) or not continues_word[out[0][i + 1]])]
        assert alone, out
