"""BleuValidation on a scripted run: a one-weight model whose weight records
the interval, and a translate function whose quality follows a script, so
that the best interval, the counter and the kept weights are known."""

import json

import keras
import numpy as np
import pytest

from keras_transformer.run_dir import RunDir
from keras_transformer.training import bleu_validation, budget_callback, checkpoints

REFERENCES = [f"Satz Nummer {i} ist hier ." for i in range(40)]
SENTENCES = [f"sentence number {i} is here ." for i in range(40)]
# Fraction of sentences translated right after each interval; best: interval 4.
QUALITY = [0.2, 0.6, 0.4, 0.6, 0.8, 0.5, 0.5, 0.5, 0.9, 0.1]


class MarkInterval(keras.callbacks.Callback):
    """Sets the model's one weight to the interval's number + 1 as the interval ends."""

    def on_epoch_end(self, epoch, logs=None):
        self.model.layers[-1].kernel.assign(np.full((1, 1), epoch + 1.0, np.float32))


class Interrupt(keras.callbacks.Callback):
    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch == self.epoch:
            raise KeyboardInterrupt("killed")


def marked_model():
    inputs = keras.Input((1,))
    model = keras.Model(inputs, keras.layers.Dense(1, use_bias=False)(inputs))
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss="mse")
    return model


def scripted_translate(model, first_try=None):
    """Quality follows QUALITY, except `first_try` {interval: quality} for this process."""
    first_try = dict(first_try or {})

    def translate(sentences):
        interval = int(round(float(model.layers[-1].kernel.numpy()[0, 0]))) - 1
        right = int(first_try.pop(interval, QUALITY[interval]) * len(sentences))
        return REFERENCES[:right] + ["falsch"] * (len(sentences) - right)
    return translate


def run(directory, epochs=10, patience=0, interrupt=None, interrupt_before_backup=False, first_try=None):
    """fit() for `epochs` one-step intervals with the callbacks in the trainer's order.
    Returns the History, or None if interrupted."""
    model, run_dir = marked_model(), RunDir(directory)
    bleu = bleu_validation.BleuValidation(run_dir, SENTENCES, REFERENCES, scripted_translate(model, first_try),
                                          patience=patience, updates_per_interval=1)
    stop = [Interrupt(interrupt)] if interrupt is not None else []
    callbacks = [MarkInterval(), bleu] + (stop if interrupt_before_backup else []) + [
        keras.callbacks.BackupAndRestore(run_dir.backup_dir, delete_checkpoint=False),
        checkpoints.KeepLastCheckpoints(run_dir, keep=20),
    ] + ([] if interrupt_before_backup else stop)
    try:
        return model.fit(np.ones((1, 1)), np.ones((1, 1)), epochs=epochs, callbacks=callbacks, verbose=0)
    except KeyboardInterrupt:
        return None


def outcome(directory):
    run_dir = RunDir(directory)
    state = bleu_validation.read_state(run_dir)
    best = marked_model()
    best.load_weights(run_dir.best_weights_path)
    scores = {e: round(s["val_bleu"], 6) for e, s in state["scores"].items()}
    return scores, state["best_epoch"], bleu_validation.progress(state["scores"]), float(best.layers[-1].kernel[0, 0])


def test_scores_are_logged_and_the_best_interval_is_kept(tmp_path):
    history = run(str(tmp_path))
    bleu = history.history["val_bleu"]
    assert len(bleu) == 10 and np.argmax(bleu) == 8 and len(history.history["val_chrf"]) == 10
    assert bleu[0] < bleu[2] < bleu[1] == bleu[3] < bleu[4]  # follows QUALITY
    _, best_epoch, (best, waited), best_weight = outcome(str(tmp_path))
    assert best_epoch == best == 8 and waited == 1
    assert best_weight == 9.0  # the weights of interval 8, not the last (10)
    state = bleu_validation.read_state(RunDir(tmp_path))
    assert [state["scores"][e]["updates"] for e in range(10)] == list(range(1, 11))
    seconds = [state["scores"][e]["seconds"] for e in range(10)]
    assert seconds == sorted(seconds) and seconds[0] > 0


def test_early_stopping_after_patience_intervals_without_a_better_score(tmp_path):
    history = run(str(tmp_path), patience=3)
    # Best after interval 4 (0.8); 5, 6 and 7 are worse: stop after 7.
    assert len(history.history["val_bleu"]) == 8
    assert bleu_validation.stopped_early(RunDir(tmp_path), 3)
    assert not bleu_validation.stopped_early(RunDir(tmp_path), 4)
    assert outcome(str(tmp_path))[3] == 5.0


@pytest.mark.parametrize("interrupt,before_backup", [(2, False), (5, False), (4, True), (7, True)])
def test_a_killed_and_resumed_run_ends_as_an_uninterrupted_one(tmp_path, interrupt, before_backup):
    """Killed after an interval's backup, or between its scoring and its
    backup (the interval then runs again); patience 3 stops both after interval 7."""
    uninterrupted = tmp_path / "whole"
    run(str(uninterrupted), patience=3)
    killed = tmp_path / "killed"
    assert run(str(killed), patience=3, interrupt=interrupt, interrupt_before_backup=before_backup) is None
    state = bleu_validation.read_state(RunDir(killed))
    assert max(state["scores"]) == interrupt  # the killed interval was scored
    history = run(str(killed), patience=3)
    if interrupt < 7:
        assert history.history["val_bleu"]  # training continued after the resume
    assert outcome(str(killed)) == outcome(str(uninterrupted))
    with open(RunDir(killed).validation_state_path) as f:
        assert sorted(map(int, json.load(f)["scores"])) == list(range(8))


def test_an_interval_run_again_after_a_kill_does_not_leave_its_first_weights_as_best(tmp_path):
    """Interval 2 first scores 0.95 (a new best, saved), the run is killed
    before its backup, and the re-run scores 0.4: the best must be interval 1 again."""
    uninterrupted = tmp_path / "whole"
    run(str(uninterrupted), epochs=4)
    killed = tmp_path / "killed"
    run(str(killed), epochs=4, interrupt=2, interrupt_before_backup=True, first_try={2: 0.95})
    assert outcome(str(killed))[3] == 3.0  # interval 2's weights were saved as best
    run(str(killed), epochs=4)
    assert outcome(str(killed)) == outcome(str(uninterrupted))
    assert outcome(str(killed))[1:] == (1, (1, 2), 2.0)


def test_decode_steps_follow_length_ordered_batches():
    """Sources sorted by length into batches of 2: (a, bb) and (ccc, dddd); each batch runs to its longest output."""
    sources = ["dddd", "a", "ccc", "bb"]
    assert bleu_validation.decode_steps(sources, [1, 5, 2, 3], batch_size=2) == max(5, 3) + max(1, 2)
    assert bleu_validation.decode_steps(sources, [1, 5, 2, 3], batch_size=4) == 5


def test_a_runaway_decode_is_priced_at_the_references_length():
    """One output of a batch ran to 49 words where its reference has 4: the
    batch's 50 steps stand for 5, so 10 s of decoding stand for 1 s; outputs
    as long as the references, or shorter, keep their time."""
    sources = ["one", "two", "three"]
    references = ["eins zwei drei vier"] * 3
    runaway = ["eins zwei drei vier", " ".join(["eins"] * 49), "eins zwei drei vier"]
    assert bleu_validation.expected_decode_seconds(10.0, sources, runaway, references, 64) == pytest.approx(1.0)
    assert bleu_validation.expected_decode_seconds(10.0, sources, references, references, 64) == pytest.approx(10.0)
    short = ["eins"] * 3  # beam outputs end short of the references in a trained model too
    assert bleu_validation.expected_decode_seconds(10.0, sources, short, references, 64) == pytest.approx(10.0)


def test_the_beam_search_is_timed_at_its_outputs_own_length_where_they_end_short(tmp_path):
    """The beam search's outputs, a word shorter each than the references (6
    steps a batch against 7), take 3 s: timed at the second validation (of three), the
    record keeps 3 s: short outputs are not stretched to the references'
    length (a trained model's beam outputs end short of them too)."""
    clock = [0.0]

    def greedy(sentences):
        clock[0] += 2.0
        return REFERENCES[:len(sentences)]

    def beam(sentences):
        clock[0] += 3.0 if len(sentences) > 1 else 0.5  # the one-sentence decode traces the search
        return [reference.rsplit(" ", 1)[0] for reference in REFERENCES[:len(sentences)]]

    run_dir = RunDir(str(tmp_path))
    bleu = bleu_validation.BleuValidation(run_dir, SENTENCES, REFERENCES, greedy, beam_translate=beam,
                                          clock=lambda: clock[0])
    marked_model().fit(np.ones((1, 1)), np.ones((1, 1)), epochs=3, callbacks=[bleu], verbose=0)
    timing = bleu_validation.beam_timing(bleu_validation.read_state(run_dir))
    assert (timing.seconds, timing.sentences, timing.trace_seconds) == (pytest.approx(3.0), len(SENTENCES), 0.5)
    assert bleu_validation.expected_decode_seconds(3.0, SENTENCES, beam(SENTENCES), REFERENCES,
                                                   64) == pytest.approx(3.0)


def test_the_record_tells_whether_the_latest_validation_scored_the_best_so_far(tmp_path):
    """`latest_is_best` after each interval of QUALITY (0.2, 0.6, 0.4, 0.6,
    0.8, 0.5, 0.5, 0.5, 0.9, 0.1): true where an interval beat every one
    before it, false for one that only equals the best (the first of equal
    scores stays the best) and for worse ones."""
    model, seen, run_dir = marked_model(), [], RunDir(str(tmp_path))
    bleu = bleu_validation.BleuValidation(run_dir, SENTENCES, REFERENCES, scripted_translate(model))

    class Seen(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            seen.append(bleu_validation.latest_is_best(bleu_validation.read_state(run_dir)))

    assert bleu_validation.latest_is_best(bleu_validation.read_state(run_dir)) is False  # nothing scored yet
    model.fit(np.ones((1, 1)), np.ones((1, 1)), epochs=10, callbacks=[MarkInterval(), bleu, Seen()], verbose=0)
    assert seen == [True, True, False, False, True, False, False, False, True, False]


class BudgetLikeStop(keras.callbacks.Callback):
    """Ends every interval as `budget_callback.TimeBudget` does (a true value
    that is not `True`, taken back at the interval's end), and training
    after interval `last` (`True`)."""

    def __init__(self, last):
        super().__init__()
        self.last, self.epoch = last, 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        self.model.stop_training = True if self.epoch == self.last else budget_callback.END_OF_INTERVAL

    def on_epoch_end(self, epoch, logs=None):
        if self.model.stop_training is budget_callback.END_OF_INTERVAL:
            self.model.stop_training = False


def test_the_beam_search_is_timed_at_every_validation_from_the_second_while_training_goes_on(tmp_path):
    """On a fake clock the beam search's decodes of the 40 sentences take 5 s,
    then 4 s, then 3 s (a trained model's search ends sooner), after a trace
    of 0.5 s on one sentence. One update an interval, each interval ended as
    a time budget ends it, and training after the fifth: the search is timed
    at the second, third and fourth validations (traced at the second only),
    not at the first (the model is untrained) nor at the fifth (no training
    follows, so no price is needed), wherever the stopping callback stands
    among the callbacks; each validation that timed it records what the
    timing took. Where `fit` runs out of intervals, the last is not timed."""
    def timed_run(directory, stop_first, epochs=9, last=4):
        clock, beam_calls, seen = [0.0], [], []
        beam_seconds = iter([5.0, 4.0, 3.0])
        run_dir = RunDir(str(directory))

        def greedy(sentences):
            clock[0] += 2.0
            return REFERENCES[:len(sentences)]

        def beam(sentences):
            beam_calls.append(len(sentences))
            clock[0] += next(beam_seconds) if len(sentences) == len(SENTENCES) else 0.5
            return REFERENCES[:len(sentences)]

        class Seen(keras.callbacks.Callback):  # the record after each validation, as `TimeBudget` reads it
            def on_epoch_end(self, epoch, logs=None):
                state = bleu_validation.read_state(run_dir)
                timing = bleu_validation.beam_timing(state)
                seen.append((state["scores"][epoch].get("beam_seconds", 0.0),
                             None if timing is None else (timing.seconds, timing.updates, timing.trace_seconds)))

        bleu = bleu_validation.BleuValidation(run_dir, SENTENCES, REFERENCES, greedy, beam_translate=beam,
                                              clock=lambda: clock[0])
        stop = [BudgetLikeStop(last)] if last is not None else []
        marked_model().fit(np.ones((1, 1)), np.ones((1, 1)), epochs=epochs, verbose=0,
                           callbacks=stop + [bleu, Seen()] if stop_first else [bleu, Seen()] + stop)
        return beam_calls, seen

    expected = ([1, len(SENTENCES), len(SENTENCES), len(SENTENCES)],
                [(0.0, None), (5.5, (5.0, 2, 0.5)), (4.0, (4.0, 3, 0.5)), (3.0, (3.0, 4, 0.5)), (0.0, (3.0, 4, 0.5))])
    assert timed_run(tmp_path / "a", stop_first=False) == expected
    assert timed_run(tmp_path / "b", stop_first=True) == expected
    assert timed_run(tmp_path / "c", stop_first=False, epochs=3, last=None) == (
        [1, len(SENTENCES)], [(0.0, None), (5.5, (5.0, 2, 0.5)), (0.0, (5.0, 2, 0.5))])
    other = RunDir(str(tmp_path / "d"))
    marked_model().fit(np.ones((1, 1)), np.ones((1, 1)), epochs=2, verbose=0,
                       callbacks=[bleu_validation.BleuValidation(other, SENTENCES, REFERENCES,
                                                                   lambda texts: REFERENCES[:len(texts)])])
    assert bleu_validation.beam_timing(bleu_validation.read_state(other)) is None  # no beam search: not timed
