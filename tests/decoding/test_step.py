import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import decoding
from keras_transformer.decoding import step as decoding_step
from tests.conftest import random_ids, varied_tiny_model

RNG = np.random.default_rng(7)
SOURCE = random_ids(RNG, 3, 8, lengths=[8, 5, 2])


def test_keeping_rows_with_beam_rows_is_reordering_then_keeping():
    """The beam search reorders the beams and drops done sentences in one gather;
    per-sentence entries (one row per sentence, shared by its beams) are kept,
    never reordered."""
    beams = 2
    cache = decoding_step.StepCache(
        beams=([tf.constant(RNG.normal(size=(6, 2, 4, 3)), tf.float32)],),  # 3 sentences x 2 beams
        sentences=({"cross": [tf.constant(RNG.normal(size=(3, 2, 5, 3)), tf.float32)],  # one row per sentence
                    "source_ids": tf.constant(np.arange(3)[:, None] * 10 + np.arange(4))},))  # an ensemble of one
    beam_rows = tf.constant([1, 1, 2, 3, 5, 4])  # each beam continues one of its own sentence's rows
    staying = tf.constant([0, 2])  # sentence 1 is done
    fused = decoding_step.keep_rows(cache, staying, beams, beam_rows)
    two_steps = decoding_step.keep_rows(decoding_step.reorder_beams(cache, beam_rows), staying, beams)
    tf.nest.map_structure(lambda a, b: np.testing.assert_array_equal(a, b), fused, two_steps)
    np.testing.assert_array_equal(fused.beams[0][0], tf.gather(cache.beams[0][0], [1, 1, 5, 4]))
    np.testing.assert_array_equal(fused.sentences[0]["cross"][0], tf.gather(cache.sentences[0]["cross"][0], [0, 2]))
    np.testing.assert_array_equal(fused.sentences[0]["source_ids"][:, 0], [0, 20])
    reordered = decoding_step.reorder_beams(cache, beam_rows)
    np.testing.assert_array_equal(reordered.beams[0][0], tf.gather(cache.beams[0][0], beam_rows))
    assert reordered.sentences is cache.sentences  # sentence rows are never reordered


def function_defs(graph_def):
    """{name: [NodeDef]} of the functions a graph calls: a while loop's condition
    and body, and the branches of conditionals inside them."""
    return {f.signature.name: list(f.node_def) for f in graph_def.library.function}


def casts_of_variables(nodes):
    """Names of the Cast nodes among `nodes` that cast a variable as it is read."""
    ops = {node.name: node.op for node in nodes}
    return [node.name for node in nodes
            if node.op == "Cast" and ops.get(node.input[0].split(":")[0]) == "ReadVariableOp"]


@pytest.mark.parametrize("search_name", ["greedy", "beam"])
def test_the_decoding_loop_casts_no_weight_at_its_steps(search_name):
    """Under mixed_bfloat16 Keras casts every float32 weight at every call; the
    searches read and cast the decoder's weights once, before their loop
    (`Transformer.decoder_weights`), so no step does."""
    model = varied_tiny_model(dtype="mixed_bfloat16")
    search = decoding.greedy_search_graph if search_name == "greedy" else decoding.beam_search_graph
    traced = tf.function(lambda ids: search(model, ids)).get_concrete_function(tf.TensorSpec([None, None], tf.int32))
    graph_def = traced.graph.as_graph_def()
    assert casts_of_variables(graph_def.node)  # before the loop: the encoder, and the weights read once
    functions = function_defs(graph_def)
    assert any("while_body" in name for name in functions)
    assert {name: casts_of_variables(nodes) for name, nodes in functions.items()
            if casts_of_variables(nodes)} == {}


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_a_step_gives_the_logits_of_the_model_reading_its_own_weights(policy):
    model = varied_tiny_model(dtype=policy)
    tokens_to_logits, cache = decoding_step.incremental_step(model, tf.constant(SOURCE), beam_size=2)
    target = random_ids(RNG, 6, 4)
    own = model.init_cache(model.encode(SOURCE))
    own = [{key: tuple(np.repeat(x, 2, axis=0) for x in layer[key]) for key in ("self", "cross")} for layer in own]
    for t in range(4):
        logits, cache = tokens_to_logits(tf.constant(target[:, t:t + 1]), cache, t)
        expected, own = model.decode_next(target[:, t:t + 1], np.repeat(SOURCE, 2, axis=0), own)
        np.testing.assert_array_equal(np.asarray(logits), np.asarray(expected)[:, -1])
