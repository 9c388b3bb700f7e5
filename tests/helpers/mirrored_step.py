"""One SGD step of a tiny Transformer on one device and under MirroredStrategy
over 8 logical CPU devices, from identical weights, on a global batch whose
replicas hold very different amounts of padding. Writes initial.npz,
single.npz and mirrored.npz to the directory given as argv[1].

SGD (not Adam) so that any error in the gradient's scale shows in the weights.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 8)

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_transformer as kt  # noqa: E402
from tests.helpers.weights import weights_by_path  # noqa: E402

REPLICAS, PER_REPLICA, LENGTH, VOCAB = 8, 2, 12, 37


def global_batch():
    rng = np.random.default_rng(7)
    source = rng.integers(3, VOCAB, size=(REPLICAS * PER_REPLICA, LENGTH)).astype("int32")
    target = rng.integers(3, VOCAB, size=(REPLICAS * PER_REPLICA, LENGTH + 1)).astype("int32")
    # Replica r gets rows 2r and 2r+1; give them from 1 to 12 real target tokens.
    for row in range(REPLICAS * PER_REPLICA):
        keep = 1 + (row * 5) % LENGTH if row % 2 else LENGTH - row // 2
        target[row, keep + 1:] = 0
        source[row, max(2, keep):] = 0
    return (source, target[:, :-1]), target[:, 1:]


def make_model(strategy):
    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = kt.Transformer.from_preset("tiny", vocab_size=VOCAB, dropout=0.0)
        model.build()
        model.compile(optimizer=keras.optimizers.SGD(1.0), loss=kt.LabelSmoothedCrossEntropy(0.1))
    return model


def run(strategy, initial_weights):
    model = make_model(strategy)
    model.set_weights(initial_weights)
    (source, target_in), target_out = global_batch()
    dataset = tf.data.Dataset.from_tensors(((source, target_in), target_out))
    model.fit(dataset, epochs=1, verbose=0)
    return weights_by_path(model)


def per_replica_batches():
    """Eight batches of different shapes, one per replica, as bucketing makes them."""
    (source, target_in), target_out = global_batch()
    batches = []
    for r in range(REPLICAS):
        rows = slice(PER_REPLICA * r, PER_REPLICA * (r + 1))
        width = max(2, int((target_out[rows] != 0).sum(axis=1).max()), int((source[rows] != 0).sum(axis=1).max()))
        batches.append(((source[rows, :width], target_in[rows, :width]), target_out[rows, :width]))
    return batches


def run_bucketed(strategy, initial_weights):
    """One step where each replica receives its own, differently shaped batch."""
    model = make_model(strategy)
    model.set_weights(initial_weights)
    batches = per_replica_batches()
    spec = ((tf.TensorSpec([None, None], tf.int32),) * 2, tf.TensorSpec([None, None], tf.int32))

    def dataset_fn(context):
        # One input pipeline feeds the replicas in turn: batch r goes to replica r.
        return tf.data.Dataset.from_generator(lambda: iter(batches), output_signature=spec)

    model.fit(strategy.distribute_datasets_from_function(dataset_fn), epochs=1, steps_per_epoch=1, verbose=0)
    return weights_by_path(model)


def main(out_dir):
    default = tf.distribute.get_strategy()
    initial_model = make_model(default)
    initial = initial_model.get_weights()
    np.savez(os.path.join(out_dir, "initial.npz"), **weights_by_path(initial_model))
    mirrored = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(REPLICAS)])
    assert mirrored.num_replicas_in_sync == REPLICAS
    np.savez(os.path.join(out_dir, "single.npz"), **run(default, initial))
    np.savez(os.path.join(out_dir, "mirrored.npz"), **run(mirrored, initial))
    np.savez(os.path.join(out_dir, "bucketed.npz"), **run_bucketed(mirrored, initial))


if __name__ == "__main__":
    main(sys.argv[1])
