import shutil

import pytest

from keras_transformer.config import RunConfig
from keras_transformer.decoding import restore
from keras_transformer.run_dir import RunDir
from keras_transformer.training import recipe
from tests.conftest import write_tsv


@pytest.fixture(scope="module")
def bfloat16_run(tmp_path_factory, small_corpus):
    """A run trained with --precision auto on a machine where auto means mixed_bfloat16."""
    directory = tmp_path_factory.mktemp("bf16")
    train, test = small_corpus
    config = RunConfig(dataset=write_tsv(directory / "corpus.tsv", train[:300] + test[:40]), preset="tiny",
                       vocab_size=500, max_length=32, steps=1, checkpoint_every=1, batch_tokens=512,
                       bleu_sentences=0, model_dir=str(directory / "run"), export_dir="", precision="auto")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(recipe, "resolve_precision", lambda p: "mixed_bfloat16" if p == "auto" else p)
        recipe.train(config, verbose=0)
    return config.model_dir


@pytest.mark.slow
def test_a_run_restores_in_the_precision_it_trained_in_wherever_it_is_restored(bfloat16_run, monkeypatch):
    assert RunDir(bfloat16_run).load_config().precision == "mixed_bfloat16"  # recorded, not "auto"
    # On a machine where auto means float32, the run still computes as it trained.
    monkeypatch.setattr(restore, "resolve_precision", lambda p: "float32" if p == "auto" else p)
    _, model, _ = restore.restore(bfloat16_run)
    assert model.dtype_policy.name == "mixed_bfloat16"
    # Another precision is an explicit choice.
    _, model, _ = restore.restore(bfloat16_run, precision="float32")
    assert model.dtype_policy.name == "float32"


def test_a_run_from_before_the_record_is_resolved_here_with_a_note(bfloat16_run, tmp_path, monkeypatch, capsys):
    old = tmp_path / "old"
    shutil.copytree(bfloat16_run, old)
    run_dir = RunDir(old)
    run_dir.save_config(RunConfig(**{**run_dir.load_config().to_dict(), "precision": "auto"}))
    monkeypatch.setattr(restore, "resolve_precision", lambda p: "float32" if p == "auto" else p)
    _, model, _ = restore.restore(str(old))
    assert model.dtype_policy.name == "float32"
    assert "does not record the precision" in capsys.readouterr().err


@pytest.mark.slow
def test_a_pre_norm_run_trains_and_restores_with_its_final_layer_norms(small_corpus, tmp_path):
    """norm_first is a setting of the run: the trainer builds the blocks it
    names, and restoring builds them again, so the checkpoint's two final
    LayerNorms (one per stack, which post-norm has not) load where they belong."""
    import numpy as np

    from keras_transformer.modeling.transformer import build_transformer
    from tests.conftest import weights_by_name

    train, test = small_corpus
    config = RunConfig(dataset=write_tsv(tmp_path / "corpus.tsv", train[:300] + test[:40]), preset="tiny",
                       norm_first=True, vocab_size=500, max_length=32, steps=2, checkpoint_every=2,
                       batch_tokens=512, bleu_sentences=0, model_dir=str(tmp_path / "run"), export_dir="",
                       precision="float32")
    recipe.train(config, verbose=0)
    assert RunDir(config.model_dir).load_config().norm_first is True
    saved = weights_by_name(RunDir(config.model_dir).checkpoints()[-1])
    _, model, _ = restore.restore(config.model_dir)
    assert model.norm_first and model.encoder.final_norm is not None and model.decoder.final_norm is not None
    post_norm = build_transformer("tiny", 500, "float32")
    assert len(saved) == len(model.weights) == len(post_norm.weights) + 4  # gamma and beta of two final norms
    trained = [np.asarray(stack.final_norm.gamma) for stack in (model.encoder, model.decoder)]
    for gamma in trained:  # moved by two updates from their initial ones, and loaded from the checkpoint
        assert 0 < np.abs(gamma - 1.0).max() < 0.1 and any(np.array_equal(gamma, v) for v in saved.values())
