"""Shared fixtures and helpers. Tests never touch the network.

The suite runs on two pytest-xdist workers (`-n 2` in pyproject.toml), each
on one TensorFlow thread (set below): most tests drive tiny models, which a
wider pool does not speed up, so a second worker uses the second core. The
longest test, the main job (a quarter of the suite's test time), is marked
`first` and started first (`pytest_collection_modifyitems`), so that one
worker trains it while the other works through the rest. Expensive setups
that tests only read are built once for both workers (`built_once`).
"""

import atexit
import fcntl
import os
import shutil
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# One TensorFlow (and oneDNN) thread per worker, for the worker and the
# scripts it starts: two workers on two cores, each with a pool as wide as
# the machine, spend their time switching between four busy threads. Set
# before TensorFlow is imported, which reads them once.
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Each worker prepares tfds datasets (the built-in corpus) in a new folder of
# its own, which its subprocesses inherit, whatever TFDS_DATA_DIR said (no
# test reads a real dataset): two processes building one dataset into one
# folder at once would collide, and a folder left by an earlier run could hold
# a corpus that an older generator made. The worker removes it when it exits.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["TFDS_DATA_DIR"] = tempfile.mkdtemp(
        prefix=f"keras_transformer-tests-tfds-{os.environ['PYTEST_XDIST_WORKER']}-")
    atexit.register(shutil.rmtree, os.environ["TFDS_DATA_DIR"], ignore_errors=True)

import h5py  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

TINY_VOCAB = 61
# The repository's top folder (scripts/, README.md).
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pytest_collection_modifyitems(config, items):
    """Tests marked `first` run before the rest, in their collected order (a
    stable sort). A test of the trained tiny run (`trained_tiny_run`) is slow:
    the first to ask for it trains it."""
    for item in items:
        if "trained_tiny_run" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: item.get_closest_marker("first") is None)


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    """Each test starts with the default dtype policy and a fixed seed."""
    keras.config.set_dtype_policy("float32")
    keras.utils.set_random_seed(1234)
    yield
    keras.config.set_dtype_policy("float32")


def random_ids(rng, batch, length, vocab=TINY_VOCAB, lengths=None):
    """(batch, length) int32 ids in [3, vocab), right-padded with 0 to `lengths`."""
    ids = rng.integers(3, vocab, size=(batch, length)).astype("int32")
    if lengths is not None:
        for row, n in enumerate(lengths):
            ids[row, n:] = 0
    return ids


def assert_round_trips(build_model, inputs, tmp_path, atol=1e-6):
    """A model's get_config/from_config clone and its .keras save/load both
    reproduce its outputs exactly (same weights, inference mode).

    `build_model()` returns a built keras.Model taking `inputs`.
    """
    model = build_model()
    expected = keras.tree.map_structure(np.asarray, model(inputs, training=False))

    clone = model.__class__.from_config(model.get_config())
    clone(inputs, training=False)
    clone.set_weights(model.get_weights())
    got = keras.tree.map_structure(np.asarray, clone(inputs, training=False))
    keras.tree.map_structure(lambda a, b: np.testing.assert_allclose(a, b, atol=atol), expected, got)

    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    got = keras.tree.map_structure(np.asarray, loaded(inputs, training=False))
    keras.tree.map_structure(lambda a, b: np.testing.assert_allclose(a, b, atol=atol), expected, got)


def functional_wrapper(layer, input_specs, call=None):
    """A functional model around `layer`, so that .keras saving covers its config.

    input_specs: list of (shape_without_batch, dtype). `call(layer, *inputs)`
    defaults to `layer(*inputs)`.
    """
    inputs = [keras.Input(shape, dtype=dtype) for shape, dtype in input_specs]
    outputs = call(layer, *inputs) if call else layer(*inputs)
    return keras.Model(inputs, outputs)


@pytest.fixture(scope="session")
def small_corpus():
    """2,000 built-in training pairs and 200 test pairs (generated, no download)."""
    from keras_transformer.data.numerals_en_de import generator as corpus

    return corpus.generate("train", size=2000), corpus.generate("test", size=200)


@pytest.fixture(scope="session")
def tokenizer_path(small_corpus, tmp_path_factory):
    """A 500-piece SentencePiece model file trained on the small corpus."""
    from keras_transformer.data.tokenizer import train_sentencepiece

    path = tmp_path_factory.mktemp("spm") / "sentencepiece.model"
    train_pairs, _ = small_corpus
    return train_sentencepiece((s for pair in train_pairs for s in pair), 500, str(path))


@pytest.fixture
def tokenizer(tokenizer_path):
    """A Tokenizer per test: its eager op resource must outlive the seed reset above."""
    from keras_transformer.data.tokenizer import Tokenizer

    return Tokenizer(tokenizer_path)


def write_tsv(path, pairs):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(f"{s}\t{t}\n" for s, t in pairs)
    return str(path)


def weights_by_name(path):
    """{dataset path: array} of a .weights.h5 file, optimizer state left out."""
    arrays = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: arrays.__setitem__(name, obj[()])
                     if isinstance(obj, h5py.Dataset) and not name.startswith("optimizer") else None)
    return arrays


def build_model(config, vocab_size):
    """The model of a RunConfig as the trainer builds it (its precision resolved here)."""
    from keras_transformer.modeling.precision import resolve_precision
    from keras_transformer.modeling.transformer import build_transformer

    return build_transformer(config.preset, vocab_size, resolve_precision(config.precision), **config.model.overrides())


def load_config(model_dir):
    """The RunConfig recorded in a run folder."""
    from keras_transformer.run_dir import RunDir

    return RunDir(model_dir).load_config()


def varied_tiny_model(vocab=TINY_VOCAB, seed=0, dtype=None):
    """A random tiny Transformer whose outputs vary from step to step.

    With tied embeddings a random model mostly repeats its previous token
    (the residual stream carries that token's own embedding); an untied
    output projection gives varied sequences, so decoding tests compare
    something non-trivial.
    """
    import keras_transformer as kt

    keras.utils.set_random_seed(seed)
    model = kt.Transformer.from_preset("tiny", vocab_size=vocab, tie_embeddings=False, dtype=dtype)
    model.build()
    return model


def make_tiny_run_dir(directory, tokenizer_path, small_corpus, **settings):
    """A model directory as scripts/train.py writes it: run_config.json (of
    the tiny preset, with `settings`), the vocabulary and one checkpoint of
    an untrained model."""
    from keras_transformer.config import RunConfig
    from keras_transformer.data.tokenizer import Tokenizer
    from keras_transformer.modeling.precision import resolve_precision
    from keras_transformer.run_dir import RunDir

    train, test = small_corpus
    tsv = write_tsv(directory / "corpus.tsv", train[:300] + test[:40])
    # As the trainer records it: the precision resolved on this machine.
    config = RunConfig(dataset=tsv, preset="tiny", vocab_size=500, max_length=32, model_dir=str(directory),
                       export_dir="", precision=resolve_precision("auto"), **settings)
    run_dir = RunDir(directory)
    run_dir.save_config(config)
    shutil.copyfile(tokenizer_path, run_dir.vocabulary_path)
    keras.utils.set_random_seed(0)
    model = build_model(config, Tokenizer(tokenizer_path).vocab_size)
    os.makedirs(run_dir.checkpoint_dir)
    model.save_weights(run_dir.checkpoint_path(0))
    return str(directory)


@pytest.fixture(scope="session")
def tiny_run_dir(tmp_path_factory, tokenizer_path, small_corpus):
    """An untrained tiny run's folder (`make_tiny_run_dir`)."""
    return make_tiny_run_dir(tmp_path_factory.mktemp("run"), tokenizer_path, small_corpus)


@pytest.fixture
def translator(tiny_run_dir):
    from keras_transformer.decoding import restore

    config, model, tokenizer = restore.restore(tiny_run_dir)
    return restore.make_translator(config.decoding, model, tokenizer)


def built_once(tmp_path_factory, name, build):
    """The folder `name` that `build(folder)` fills, built by the first
    pytest-xdist worker that asks for it and shared by all: the workers'
    temporary folders have one parent, where a lock file makes the others
    wait for the first. Tests must only read it."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    folder, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session")
def trained_tiny_run(tmp_path_factory, small_corpus):
    """A float32 tiny run trained by `trainer.train` for 400 updates on the
    small corpus, once for all workers (`built_once`). Its translations end
    on EOS well before the length limit, so engines that differ only in how
    they stop at the limit must agree."""
    from keras_transformer.config import RunConfig
    from keras_transformer.training import recipe

    def build(directory):
        train, test = small_corpus
        config = RunConfig(dataset=write_tsv(directory / "corpus.tsv", train + test[:40]), preset="tiny",
                           vocab_size=500, max_length=32, steps=400, checkpoint_every=400, batch_tokens=1024,
                           warmup_steps=100, learning_rate_scale=2.0, precision="float32",
                           model_dir=str(directory / "run"), export_dir="")
        recipe.train(config, verbose=0)

    return str(built_once(tmp_path_factory, "trained_run", build) / "run")


def run_entry_point(main, argv, capsys, stdin=None, monkeypatch=None):
    """(exit code, stdout, stderr) of a `keras_transformer.cli` entry point called in
    this process; errors exit through SystemExit. `stdin` needs `monkeypatch`."""
    if stdin is not None:
        import io
        import sys

        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    try:
        code = main(argv)
    except SystemExit as exit_info:
        code = exit_info.code
    out, err = capsys.readouterr()
    return code, out, err
