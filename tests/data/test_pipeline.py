import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.config import RunConfig
from keras_transformer.data import pipeline
from keras_transformer.data.summary import format_summary, summarize
from keras_transformer.modeling.special_ids import BOS_ID, EOS_ID, PAD_ID
from tests.conftest import write_tsv


def pairs_dataset(pairs):
    sources, targets = zip(*pairs)
    return tf.data.Dataset.from_tensor_slices((list(sources), list(targets)))


def first_batches(batches, n):
    return [((s.numpy(), ti.numpy()), to.numpy()) for (s, ti), to in batches.take(n)]


def test_elements_are_source_eos_and_shifted_targets(small_corpus, tokenizer):
    train, _ = small_corpus
    batches = pipeline.make_batches(pairs_dataset(train[:50]), tokenizer, 512, 64, training=False)
    (source, target_in), target_out = next(iter(batches))
    source, target_in, target_out = source.numpy(), target_in.numpy(), target_out.numpy()
    assert (target_in[:, 0] == BOS_ID).all()
    np.testing.assert_array_equal(target_in[:, 1:], np.where(target_out[:, :-1] == EOS_ID, target_in[:, 1:], target_out[:, :-1]))
    for row in range(source.shape[0]):
        real = source[row][source[row] != PAD_ID]
        assert real[-1] == EOS_ID and EOS_ID not in real[:-1]
        out = target_out[row][target_out[row] != PAD_ID]
        assert out[-1] == EOS_ID
        np.testing.assert_array_equal(target_in[row][1:len(out)], out[:-1])


@pytest.mark.parametrize("batch_tokens", [256, 1000])
def test_no_batch_exceeds_the_token_budget_and_shapes_are_few(small_corpus, tokenizer, batch_tokens):
    train, _ = small_corpus
    boundaries = pipeline.bucket_boundaries(64)
    batches = pipeline.make_batches(pairs_dataset(train), tokenizer, batch_tokens, 64, training=True, seed=3)
    shapes = set()
    for (source, target_in), target_out in first_batches(batches, 300):
        assert source.size <= batch_tokens and target_out.size <= batch_tokens
        assert source.shape == target_in.shape == target_out.shape
        shapes.add(source.shape)
    assert len(shapes) <= len(boundaries)


def test_bucketing_beats_naive_batches_on_varied_lengths(small_corpus, tokenizer):
    train, _ = small_corpus
    dataset = pairs_dataset(train)
    stats = pipeline.batch_stats(pipeline.make_batches(dataset, tokenizer, 1024, 64, training=False))
    naive = pipeline.batch_stats(pipeline.naive_batches(dataset, tokenizer, 64, stats.pairs // stats.batches))
    print(f"padding efficiency: bucketed {stats.padding_efficiency:.3f}, naive {naive.padding_efficiency:.3f}")
    assert stats.pairs == naive.pairs == len(train)
    assert stats.padding_efficiency >= 0.85
    assert stats.padding_efficiency > naive.padding_efficiency + 0.1


@pytest.mark.parametrize("training", [False, True])
def test_no_pass_has_an_autotuning_thread_and_each_holds_the_batches_an_autotuned_one_does(small_corpus, tokenizer,
                                                                                          training):
    """Neither validation nor training batches run tf.data's autotuning,
    whose thread kept a spent iterator's deletion waiting (up to a minute
    after a training `fit`), and they hold what an autotuned pass does."""
    train, _ = small_corpus

    def batches():  # each its own pipeline: a training shuffle's second pass over one pipeline reshuffles
        return pipeline.make_batches(pairs_dataset(train[:300]), tokenizer, 512, 64, training=training, seed=3)

    plain = batches()
    assert plain.options().autotune.enabled is False
    options = tf.data.Options()
    options.autotune.enabled = True
    tuned = batches().with_options(options)
    assert tuned.options().autotune.enabled is True
    for (a, b) in zip(first_batches(plain, 100), first_batches(tuned, 100), strict=True):
        for x, y in zip((a[0][0], a[0][1], a[1]), (b[0][0], b[0][1], b[1])):
            np.testing.assert_array_equal(x, y)


def test_shuffling_is_deterministic_given_a_seed(small_corpus, tokenizer):
    train, _ = small_corpus

    def batches(seed):
        return first_batches(pipeline.make_batches(pairs_dataset(train), tokenizer, 512, 64, True, seed=seed), 5)

    same_a, same_b, other = batches(1), batches(1), batches(2)
    for (a, _), (b, _) in zip(same_a, same_b):
        np.testing.assert_array_equal(a[0], b[0])
    assert any(a[0].shape != c[0].shape or not np.array_equal(a[0], c[0]) for (a, _), (c, _) in zip(same_a, other))


def test_input_pipelines_read_disjoint_shards(small_corpus, tokenizer):
    train, _ = small_corpus
    seen = []
    for pipeline_id in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline_id,
                                             num_replicas_in_sync=2)
        batches = pipeline.make_batches(pairs_dataset(train[:200]), tokenizer, 512, 64, training=False,
                                        input_context=context)
        rows = {tuple(r[r != PAD_ID]) for (s, _), _ in batches.as_numpy_iterator() for r in s}
        seen.append(rows)
    assert seen[0] and seen[1] and not seen[0] & seen[1]


def test_budget_smaller_than_the_longest_bucket_is_a_clear_error(tokenizer):
    with pytest.raises(ValueError, match="batch_tokens=16 is smaller than the longest bucket"):
        pipeline.make_batches(pairs_dataset([("a", "b")]), tokenizer, 16, 64, training=False)


def test_inspect_data_reports_skips_and_efficiency(small_corpus, tokenizer, tmp_path):
    train, _ = small_corpus
    path = write_tsv(tmp_path / "c.tsv", [("x " * 200, "y")] + train[:400])
    with open(path, "ab") as f:
        f.write(b"no tab\n\tempty\n\xff\xfe\tbad\n")
    config = RunConfig(dataset=path, max_length=64, batch_tokens=512, model_dir=str(tmp_path / "run"))
    summary = summarize(config.data, tokenizer, split="train")
    assert summary["pairs_skipped"] == {"no TAB": 1, "empty side": 1, "undecodable": 1,
                                        "over-long (> 64 pieces)": 1}
    assert summary["pairs_kept"] == 380  # 401 read, 20 held out for validation, 1 too long
    assert summary["distinct_batch_shapes"] <= summary["buckets"]
    assert summary["padding_efficiency"] > summary["naive_padding_efficiency"]
    text = format_summary(summary)
    assert "no TAB: 1" in text and "padding efficiency:" in text and "vocabulary size:        500" in text
