"""`Dense`: the projection layer of every Transformer block, with weights a decoding loop reads once.

Under a mixed dtype policy (mixed_bfloat16, the default where the CPU has
bfloat16), a Keras layer keeps float32 variables and casts each one to the
compute dtype every time it runs. In a decoding loop that is every output
step, for every projection of every decoder layer: a cost per step that
does not depend on the batch. A loop instead reads the decoder's weights
once, before it starts (`read_once`), and runs its steps
`with reading(weights):`, so the steps use those tensors and never touch a
variable. The cast is the one Keras makes (`ops.cast` to the compute
dtype), so the results are the same to the bit.

Why a context and not an argument: the weights would otherwise have to
travel through `Transformer.decode_next`, the decoder stack, each decoder
layer, its attention and feed-forward sublayers, down to every `Dense`,
changing each of those signatures for the one caller that needs it
(`decoding.step.incremental_step`). The context is what it changes, and
only that: inside a `reading(weights)` block, a `Dense` whose kernel is in
`weights` (looked up by the variable's identity) uses the value read
once; every other `Dense`, and every `Dense` outside such a block, is
`keras.layers.Dense`. The switch is thread-local, so a search traced in one
thread does not change layers that another thread runs. It is set while a
graph is traced (the search is a `tf.function`), so the traced graph holds
the values read once and no switch at run time.

Outside `reading`, and for Keras' quantized or LoRA kernels (which are not
plain variables), `Dense` is `keras.layers.Dense`.
"""

import contextlib
import threading

import keras
from keras import ops

_active = threading.local()


def _weights_in_use():
    return getattr(_active, "weights", None)


def read_once(layer):
    """{id(variable): value} for every variable of `layer` and its sublayers,
    in the compute dtype of the `layer` (float variables only): what its
    `Dense` sublayers read at every step, read and cast once. Call it where
    the loop's invariants are built, outside the loop."""
    dtype = layer.compute_dtype
    values = {}
    for variable in layer.weights:
        value = ops.convert_to_tensor(variable)
        if keras.backend.is_float_dtype(variable.dtype):
            value = ops.cast(value, dtype)
        values[id(variable)] = value
    return values


@contextlib.contextmanager
def reading(weights):
    """Within this block, `Dense` layers whose kernel (and bias) are in
    `weights` (from `read_once`) use those values instead of their variables."""
    previous = _weights_in_use()
    _active.weights = weights
    try:
        yield
    finally:
        _active.weights = previous


def project(inputs, kernel):
    """(..., D) inputs times a (D, N) kernel -> (..., N), as `ops.matmul`.

    Where the leading dimensions have at most one unknown size, as a
    decoding step's (B*, 1, D) has, this is one 2-D MatMul between two
    reshapes whose shapes are constants: what `ops.matmul` (`tf.tensordot`)
    runs, to the bit, without the nine small ops per call with which it
    works out those shapes at run time. A decoding loop runs some 25
    projections per step. Otherwise it is `ops.matmul`."""
    outer = list(inputs.shape[:-1])
    if len(outer) < 2 or outer.count(None) > 1 or inputs.shape[-1] is None:
        return ops.matmul(inputs, kernel)
    flat = ops.reshape(inputs, (-1, inputs.shape[-1]))  # (prod(...), D)
    return ops.reshape(ops.matmul(flat, kernel), [-1 if d is None else d for d in outer] + [kernel.shape[-1]])


@keras.saving.register_keras_serializable(package="keras_transformer")
class Dense(keras.layers.Dense):
    """`keras.layers.Dense` that uses the weights of an enclosing `reading` block if it has them.

    Same arguments, weights and results as `keras.layers.Dense`.

    Example:
    >>> layer = Dense(4)
    >>> x = keras.ops.ones((2, 3))
    >>> y = layer(x)
    >>> with reading(read_once(layer)):
    ...     same = layer(x)
    >>> bool(keras.ops.all(y == same))
    True
    """

    def call(self, inputs, training=None):
        weights = _weights_in_use()
        kernel = None if weights is None else weights.get(id(self.kernel))
        if kernel is None:
            return super().call(inputs, training=training)
        x = project(inputs, kernel)
        if self.bias is not None:
            x = ops.add(x, weights[id(self.bias)])
        if self.activation is not None:
            x = self.activation(x)
        return x
