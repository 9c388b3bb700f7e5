import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.modeling.layers import dense
from tests.conftest import assert_round_trips, functional_wrapper

RNG = np.random.default_rng(5)
X = RNG.normal(size=(3, 2, 6)).astype("float32")


def built(policy, **kwargs):
    layer = dense.Dense(5, dtype=policy, bias_initializer="random_normal", **kwargs)
    layer(X)
    return layer


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("kwargs", [{}, {"activation": "relu"}, {"use_bias": False}])
def test_weights_read_once_give_the_layers_own_results_to_the_bit(policy, kwargs):
    layer = built(policy, **kwargs)
    weights = dense.read_once(layer)
    assert all(value.dtype == layer.compute_dtype for value in weights.values())
    with dense.reading(weights):
        read_once = np.asarray(layer(X))
    own = np.asarray(layer(X))
    assert own.dtype == read_once.dtype == layer.compute_dtype
    np.testing.assert_array_equal(read_once.astype("float32"), own.astype("float32"))


def test_within_reading_the_layer_uses_the_given_values_not_its_variables():
    layer = built("float32")
    weights = dense.read_once(layer)
    weights[id(layer.kernel)] = tf.zeros_like(weights[id(layer.kernel)])
    with dense.reading(weights):
        bias_only = np.asarray(layer(X))
    np.testing.assert_allclose(bias_only, np.broadcast_to(np.asarray(layer.bias), bias_only.shape))
    assert np.abs(np.asarray(layer(X)) - bias_only).max() > 1e-3  # and after the block, its own again


def test_layers_without_read_weights_and_lora_kernels_run_as_keras_dense():
    layer, other = built("float32"), built("float32")
    expected = np.asarray(keras.ops.matmul(X, layer.kernel) + layer.bias)
    with dense.reading(dense.read_once(other)):  # holds another layer's weights only
        np.testing.assert_allclose(np.asarray(layer(X)), expected, rtol=1e-6)
    layer.enable_lora(2, b_initializer="random_normal")
    lora = np.asarray(layer(X))
    assert np.abs(lora - expected).max() > 1e-3
    with dense.reading(dense.read_once(layer)):  # the LoRA kernel is not a variable: Keras' own path
        np.testing.assert_array_equal(np.asarray(layer(X)), lora)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("spec, shape", [((None, 1, 6), (3, 1, 6)), ((None, None, 6), (3, 2, 6)),
                                         ((None, 6), (4, 6)), ((3, 2, 6), (3, 2, 6))])
def test_project_is_ops_matmul_to_the_bit(dtype, spec, shape):
    x = tf.cast(RNG.normal(size=shape), dtype)
    kernel = tf.cast(RNG.normal(size=(6, 5)), dtype)
    projected = tf.function(lambda x: dense.project(x, kernel), input_signature=[tf.TensorSpec(spec, dtype)])(x)
    expected = keras.ops.matmul(x, kernel)
    assert projected.shape == expected.shape
    np.testing.assert_array_equal(np.asarray(tf.cast(projected, "float32")), np.asarray(tf.cast(expected, "float32")))


def test_a_decoding_steps_projection_works_out_no_shapes_at_run_time():
    """(B*, 1, D): one MatMul between two reshapes to constant shapes, none of
    tensordot's run-time shape arithmetic."""
    graph = tf.function(lambda x: dense.project(x, tf.ones([6, 5]))).get_concrete_function(
        tf.TensorSpec([None, 1, 6])).graph
    kinds = sorted(op.type for op in graph.get_operations() if op.type not in ("Placeholder", "Const", "Identity"))
    assert kinds == ["MatMul", "Reshape", "Reshape"]


def test_round_trips(tmp_path):
    assert_round_trips(lambda: functional_wrapper(built("float32", activation="relu"), [((2, 6), "float32")]), X,
                       tmp_path)
