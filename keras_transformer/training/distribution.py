"""`tf.distribute` set-up: the strategy a run asks for and each worker's role."""

import os

import tensorflow as tf

from keras_transformer.config import STRATEGIES


def make_strategy(name):
    """The tf.distribute strategy called `name` (one of STRATEGIES)."""
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker":
        if "TF_CONFIG" not in os.environ:
            raise ValueError("--strategy multi_worker needs the TF_CONFIG environment variable; see the README.")
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver()
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    raise ValueError(f"Unknown strategy {name!r}; expected one of {list(STRATEGIES)}.")


def worker_role(strategy):
    """(is_chief, task_id). Only the chief writes checkpoints, logs and exports."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True, 0
    task_type, task_id = resolver.task_type, resolver.task_id or 0
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return (task_type == "chief") or (task_type == "worker" and task_id == 0 and not has_chief), task_id


def worker_run_dir(run_dir, strategy):
    """The chief writes to the run folder; other workers to a private folder inside it."""
    is_chief, task_id = worker_role(strategy)
    return run_dir if is_chief else run_dir.worker(task_id)
