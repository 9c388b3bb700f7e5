"""Teacher-forced scores of given translations equal what beam search assigns."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import decoding
from keras_transformer.decoding import restore, scoring
from keras_transformer.modeling.special_ids import EOS_ID
from tests.conftest import random_ids, varied_tiny_model

SOURCE = random_ids(np.random.default_rng(5), 4, 9, lengths=[9, 6, 4, 2])


@pytest.fixture(scope="module")
def model():
    return varied_tiny_model()


def without_eos(ids):
    """(B, L) decoder output -> (B, L) target pieces: EOS and what follows set to 0."""
    ids = np.asarray(ids).copy()
    for row in ids:
        row[np.argmax(row == EOS_ID):] = 0
    return ids


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_scores_of_beam_outputs_equal_the_beam_scores(model, alpha):
    """The normalized score of beam search's own translations is the score it
    reported: the same sum of log-softmax, over the same pieces and EOS."""
    ids, beam_scores = (np.asarray(x)[:, 0] for x in decoding.beam_search(model, SOURCE, beam_size=4, alpha=alpha))
    scores = scoring.score_ids(model, SOURCE, without_eos(ids), alpha=alpha)
    np.testing.assert_allclose(scores["normalized"], beam_scores, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(scores["tokens"], (np.asarray(ids) != 0).sum(axis=1))  # pieces + EOS


def test_per_token_log_probs_are_one_full_pass(model):
    """Each column is log_softmax(logits)[next piece], EOS last, zero after it."""
    target = np.array([[7, 9, 11], [5, 0, 0], [12, 13, 0], [0, 0, 0]], "int32")
    got = np.asarray(scoring.token_log_probs(model, SOURCE, target))
    target_in = np.array([[2, 7, 9, 11], [2, 5, 0, 0], [2, 12, 13, 0], [2, 0, 0, 0]], "int32")
    log_probs = np.asarray(tf.nn.log_softmax(model((SOURCE, target_in), training=False)))
    expected = np.zeros((4, 4), "float32")
    for row, pieces in enumerate([[7, 9, 11, 3], [5, 3], [12, 13, 3], [3]]):
        for position, piece in enumerate(pieces):
            expected[row, position] = log_probs[row, position, piece]
    np.testing.assert_allclose(got, expected, atol=1e-6)
    scores = scoring.score_ids(model, SOURCE, target, alpha=0.0)
    np.testing.assert_allclose(scores["per_token"], expected.sum(1) / np.array([4, 2, 3, 1]), rtol=1e-6)


def test_an_ensemble_of_copies_scores_as_one_model(model):
    target = without_eos(np.asarray(decoding.greedy_search(model, SOURCE).ids)[:, 0])
    alone = scoring.score_ids(model, SOURCE, target)
    pair = scoring.score_ids([model, varied_tiny_model()], SOURCE, target)
    for name in ("log_prob", "per_token", "normalized"):
        np.testing.assert_allclose(pair[name], alone[name], rtol=1e-5, atol=1e-6)
    other = varied_tiny_model(seed=1)
    mixed = scoring.token_log_probs([model, other], SOURCE, target)
    expected = np.log((np.exp(scoring.token_log_probs(model, SOURCE, target)) +
                       np.exp(scoring.token_log_probs(other, SOURCE, target))) / 2)
    mask = np.concatenate([target, np.zeros((4, 1), "int32")], axis=1) != 0
    mask[np.arange(4), (target != 0).sum(1)] = True  # the EOS column
    np.testing.assert_allclose(np.where(mask, mixed, 0), np.where(mask, expected, 0), atol=1e-5)


def test_score_pairs_tokenizes_as_training_and_keeps_the_order(tiny_run_dir):
    """Strings in, per-pair scores out in input order, batching not changing them."""
    from keras_transformer.data import pipeline

    _, model, tokenizer = restore.restore(tiny_run_dir)
    sources = ["It is half past seven.", "three", "Yesterday, my brother bought two apples.", "one"]
    targets = ["Es ist halb acht.", "drei", "Gestern hat mein Bruder zwei Äpfel gekauft.", ""]
    batched = scoring.score_pairs(model, tokenizer, sources, targets, alpha=0.6, batch_size=3, progress=False)
    for i, (source, target) in enumerate(zip(sources, targets)):
        encoded = list(pipeline.encode_pairs(tf.data.Dataset.from_tensors((source, target)), tokenizer))[0]
        source_ids, target_ids = (np.asarray(t)[None, :] for t in encoded)  # pieces + EOS; BOS + pieces + EOS
        one = scoring.score_ids(model, source_ids, target_ids[:, 1:-1], alpha=0.6)
        np.testing.assert_allclose(batched["log_prob"][i], one["log_prob"][0], rtol=1e-5)
        assert batched["tokens"][i] == target_ids.shape[1] - 1
    assert batched["tokens"][3] == 1  # an empty target is scored as EOS alone
    with pytest.raises(ValueError, match="2 sources but 1 targets"):
        scoring.score_pairs(model, tokenizer, ["a", "b"], ["c"])
