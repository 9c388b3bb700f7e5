"""Fine-tuning: a new run that starts from a trained run (`--init-from RUN_DIR`).

The typical use is adapting a model trained on a large general corpus (WMT)
to a user's own domain. The new run takes from RUN_DIR:
- the weights the run is used with (`RunDir.default_weights`: the
  model its main job chose, else its newest checkpoint);
- its SentencePiece vocabulary, copied into the new model directory;
- its preset, depths, block placement and vocabulary size, which fix the
  weights' shapes.
The optimizer state and the learning-rate schedule start fresh; the README
shows schedule flags that suit fine-tuning.
"""

import os
import shutil

from keras_transformer.config import INHERITED_BY_INIT_FROM as INHERITED
from keras_transformer.files import atomic_path
from keras_transformer.modeling import presets
from keras_transformer.run_dir import RunDir


def source_config(run_dir):
    """The RunConfig of the run to start from; a clear error if it is not a trained run."""
    if not os.path.isdir(run_dir):
        raise FileNotFoundError(f"--init-from {run_dir!r} is not a directory; pass a model directory of a trained run.")
    return RunDir(run_dir).load_config()


def inherit(values, run_dir, given):
    """`values` (the flags of the new run, a dict) with the inherited settings
    taken from `run_dir`. `given` names the flags the user passed; one of
    those that contradicts the source run is a ValueError naming both values."""
    source = source_config(run_dir)

    def differs(name):  # an unset setting is the preset's: --no-norm-first agrees with a post-norm run's None
        if name == "norm_first":  # the new run builds the source run's preset
            return (presets.resolved_norm_first(source.preset, values[name])
                    != presets.resolved_norm_first(source.preset, source.norm_first))
        if name in ("encoder_layers", "decoder_layers"):  # the depths of the source run's preset
            preset = presets.get_preset(source.preset)
            return presets.depths(preset, **{name: values[name]}) != presets.depths(preset,
                                                                                **{name: getattr(source, name)})
        return values[name] != getattr(source, name)

    conflicts = [f"--{name.replace('_', '-')} {values[name]!r} (the run has {getattr(source, name)!r})"
                 for name in INHERITED if name in given and differs(name)]
    if conflicts:
        raise ValueError(f"--init-from {run_dir!r} fixes the model's shape; these flags contradict it: "
                         f"{'; '.join(conflicts)}. Leave them out to take the run's.")
    return {**values, **{name: getattr(source, name) for name in INHERITED}}


def check_compatible(init_from, model_dir, inherited):
    """Raises ValueError if a run in `model_dir` with the `inherited` settings
    ({name: value} of INHERITED) cannot start from the run in `init_from`."""
    inherit(inherited, init_from, INHERITED)
    initial_weights(init_from)  # raises if the run has no weights
    if os.path.abspath(init_from) == os.path.abspath(model_dir):
        raise ValueError(f"--init-from and --model-dir are the same folder ({model_dir!r}); "
                         "a fine-tuning run needs a model directory of its own.")


def initial_weights(run_dir):
    """The `.weights.h5` file the new run starts from."""
    return RunDir(run_dir).default_weights()


def copy_vocabulary(run_dir, path):
    """Copies the run's SentencePiece model to `path`."""
    source = RunDir(run_dir).vocabulary_path
    if not os.path.exists(source):
        raise FileNotFoundError(f"{source!r} does not exist; is {run_dir!r} a trained run?")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with atomic_path(path) as tmp:
        shutil.copyfile(source, tmp)
