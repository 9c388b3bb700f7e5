import keras
import numpy as np
import pytest

import keras_transformer as kt
from tests.conftest import TINY_VOCAB, assert_round_trips, random_ids
from tests.helpers.docs import docs_table

RNG = np.random.default_rng(0)
SOURCE = random_ids(RNG, 3, 9, lengths=[9, 6, 3])
TARGET = random_ids(RNG, 3, 7, lengths=[7, 5, 2])


def tiny(**overrides):
    model = kt.Transformer.from_preset("tiny", vocab_size=TINY_VOCAB, **overrides)
    model((SOURCE, TARGET))
    return model


def test_logits_are_float32_over_the_vocabulary():
    logits = tiny()((SOURCE, TARGET), training=False)
    assert tuple(logits.shape) == (3, 7, TINY_VOCAB)
    assert logits.dtype == "float32"


def test_changing_target_token_t_never_changes_earlier_logits():
    model = tiny()
    base = np.asarray(model((SOURCE, TARGET), training=False))
    for t in range(TARGET.shape[1]):
        changed = TARGET.copy()
        changed[:, t] = (changed[:, t] + 7) % (TINY_VOCAB - 3) + 3
        out = np.asarray(model((SOURCE, changed), training=False))
        np.testing.assert_allclose(out[:, :t], base[:, :t], atol=1e-5)
        assert np.abs(out[:, t:] - base[:, t:]).max() > 1e-4  # it does change the rest


def test_appending_source_padding_does_not_change_logits():
    model = tiny()
    base = np.asarray(model((SOURCE, TARGET), training=False))
    padded = np.pad(SOURCE, ((0, 0), (0, 11)))
    np.testing.assert_allclose(model((padded, TARGET), training=False), base, atol=1e-5)


def test_shared_vocabulary_ties_all_three_matrices():
    model = tiny()
    embeddings = [w for w in model.weights if "embeddings" in w.path]
    assert len(embeddings) == 1
    assert model.source_embedding is model.target_embedding and model.output_projection is None


def test_untied_and_separate_vocabularies():
    untied = tiny(tie_embeddings=False)
    assert len([w for w in untied.weights if "embeddings" in w.path]) == 2
    assert untied.output_projection is not None
    separate = kt.Transformer.from_preset("tiny", vocab_size=TINY_VOCAB, target_vocab_size=40)
    logits = separate((SOURCE, np.minimum(TARGET, 39)))
    assert tuple(logits.shape) == (3, 7, 40)


@pytest.mark.parametrize("preset,table3", [("tiny", None), ("small", None), ("base", 65e6), ("big", 213e6)])
def test_parameter_counts_match_table_3_and_the_architecture_page(preset, table3):
    """Base and big within 5% of the paper's Table 3; every preset's row on
    the architecture page is its numbers and its built size (shared 37,000
    vocabulary, tied), to 0.1M."""
    model = kt.Transformer.from_preset(preset, vocab_size=37000)
    model.build()
    if table3:
        assert abs(model.count_params() - table3) / table3 < 0.05, model.count_params()
    config = kt.presets.get_preset(preset)
    table = docs_table("| preset | N | d_model | d_ff | h | dropout | parameters (shared vocabulary 37000, tied) |")
    layers, d_model, d_ff, heads, dropout, parameters = {row[0]: row[1:] for row in table}[preset]
    assert (int(layers), int(d_model), int(d_ff), int(heads), float(dropout)) == (
        config.num_layers, config.d_model, config.d_ff, config.num_heads, config.dropout)
    assert parameters.split("M")[0] == f"{model.count_params() / 1e6:.1f}"


def test_presets_carry_the_papers_numbers():
    base, big = kt.presets.get_preset("base"), kt.presets.get_preset("big")
    assert (base.num_layers, base.d_model, base.d_ff, base.num_heads, base.dropout) == (6, 512, 2048, 8, 0.1)
    assert (big.num_layers, big.d_model, big.d_ff, big.num_heads, big.dropout) == (6, 1024, 4096, 16, 0.3)
    assert not base.norm_first and base.tie_embeddings


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_forward_gives_finite_float32_logits(policy):
    model = tiny(dtype=policy)
    logits = model((SOURCE, TARGET), training=False)
    assert logits.dtype == "float32"
    assert np.isfinite(np.asarray(logits)).all()
    assert model.encoder.compute_dtype == keras.DTypePolicy(policy).compute_dtype
    assert all(w.dtype == "float32" for w in model.weights)


def test_cached_decoding_matches_the_full_decoder_pass():
    model = tiny()
    full = np.asarray(model((SOURCE, TARGET), training=False))
    cache = model.init_cache(model.encode(SOURCE))
    for t in range(TARGET.shape[1]):
        logits, cache = model.decode_next(TARGET[:, t:t + 1], SOURCE, cache)
        # Rows whose target is padding at t differ (the full pass masks padded keys); compare real ones.
        real = TARGET[:, t] != 0
        np.testing.assert_allclose(np.asarray(logits)[real, 0], full[real, t], atol=1e-5)


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_a_given_output_matrix_gives_the_logits_the_embedding_gives(policy):
    """Decoding loops read the tied output matrix once (`output_matrix`) and pass
    it to every step; the logits must be those of reading it in the step."""
    model = tiny(dtype=policy)
    matrix = model.output_matrix()
    assert tuple(matrix.shape) == (model.d_model, TINY_VOCAB) and matrix.dtype == model.compute_dtype
    cache = model.init_cache(model.encode(SOURCE))
    read, _ = model.decode_next(TARGET[:, :3], SOURCE, cache)
    given, _ = model.decode_next(TARGET[:, :3], SOURCE, cache, output_matrix=matrix)
    np.testing.assert_array_equal(np.asarray(given), np.asarray(read))
    assert tiny(tie_embeddings=False).output_matrix() is None


@pytest.mark.parametrize("overrides", [{}, {"tie_embeddings": False, "norm_first": True},
                                       {"num_encoder_layers": 3, "num_decoder_layers": 1}])
def test_round_trips(overrides, tmp_path):
    assert_round_trips(lambda: tiny(**overrides), (SOURCE, TARGET), tmp_path, atol=1e-5)


def test_each_stack_takes_its_own_depth_and_num_layers_is_the_shorthand_for_both():
    def depths(model):
        return len(model.encoder.blocks), len(model.decoder.blocks)

    assert depths(tiny()) == (2, 2)  # the tiny preset's N
    assert depths(tiny(num_layers=3)) == (3, 3)
    assert depths(tiny(num_encoder_layers=3, num_decoder_layers=1)) == (3, 1)
    assert depths(tiny(num_layers=4, num_decoder_layers=1)) == (4, 1)
    # A decoder layer has a cross-attention block (4 d^2 + 4 d weights and a
    # LayerNorm's 2 d) more than an encoder layer; moving a layer from the
    # decoder to the encoder removes exactly that many weights.
    d = 32
    assert tiny().count_params() - tiny(num_encoder_layers=3, num_decoder_layers=1).count_params() == (
        4 * d * d + 4 * d + 2 * d)
    with pytest.raises(ValueError, match="num_layers must be at least 1; got 0"):
        tiny(num_decoder_layers=0)


def test_bad_arguments_name_the_bad_value_and_the_valid_ones():
    with pytest.raises(ValueError, match=r"Unknown preset 'huge'.*\['base', 'big', 'small', 'tiny'\]"):
        kt.Transformer.from_preset("huge", vocab_size=100)
    with pytest.raises(ValueError, match=r"d_model=100, num_heads=8.*Valid num_heads.*\[1, 2, 4, 5"):
        kt.Transformer(vocab_size=100, d_model=100, num_heads=8)
    with pytest.raises(ValueError, match="Unknown Transformer argument.*'heads'"):
        kt.Transformer.from_preset("tiny", vocab_size=100, heads=3)
