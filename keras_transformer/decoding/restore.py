"""Loading a trained run for inference: its model, vocabulary and decoding settings.

`restore` rebuilds exactly the model a run trained: its preset, its
vocabulary and the dtype policy it trained in (recorded in the run folder
by the trainer), then loads the weights the run is used with
(`RunDir.default_weights`). Another policy is an explicit choice
(`precision=`; the scripts' `--precision`).
"""

import sys

from keras_transformer.data.tokenizer import Tokenizer
from keras_transformer.decoding.translator import Translator
from keras_transformer.modeling.precision import resolve_precision
from keras_transformer.modeling.transformer import build_transformer
from keras_transformer.run_dir import RunDir


def run_precision(model, run_dir, precision=None):
    """The dtype policy to restore a run in: `precision` if given, else the
    one the run recorded in its `config.ModelSettings`. Runs written before
    the policy was recorded say "auto"; they are resolved on this machine,
    as they always were, with a note on stderr."""
    if precision is not None:
        return resolve_precision(precision)
    if model.precision == "auto":
        resolved = resolve_precision("auto")
        print(f"note: {run_dir.path!r} does not record the precision it trained in (written before "
              f"keras_transformer 0.2); using {resolved}, this machine's choice.", file=sys.stderr)
        return resolved
    return model.precision


def restore(model_dir, weights=None, precision=None):
    """(config, model, tokenizer) of a trained run, with the given `.weights.h5`
    file or the run's own choice, computing in the run's recorded dtype
    policy unless `precision` names another."""
    run_dir = RunDir(model_dir)
    config = run_dir.load_config()
    tokenizer = Tokenizer(run_dir.vocabulary_path)
    settings = config.model
    model = build_transformer(settings.preset, tokenizer.vocab_size, run_precision(settings, run_dir, precision),
                              **settings.overrides())
    model.load_weights(weights or run_dir.default_weights())
    return config, model, tokenizer


def restore_ensemble(model_dirs, weights=None, precision=None):
    """(config of the first run, [models], tokenizer) of one or more training
    directories sharing one SentencePiece vocabulary; ValueError naming the
    first that does not. `weights` applies to a single directory only."""
    model_dirs = [model_dirs] if isinstance(model_dirs, str) else list(model_dirs)
    if weights is not None and len(model_dirs) > 1:
        raise ValueError(f"--weights applies to one model directory; got {len(model_dirs)}.")
    restored = [restore(path, weights, precision) for path in model_dirs]
    config, _, tokenizer = restored[0]
    for path, (_, _, other) in zip(model_dirs[1:], restored[1:]):
        if other.model_proto != tokenizer.model_proto:
            raise ValueError(f"Ensemble members must share one vocabulary: {path!r} has another SentencePiece "
                             f"model than {model_dirs[0]!r}.")
    return config, [model for _, model, _ in restored], tokenizer


def make_translator(decoding, model, tokenizer, beam_size=None, alpha=None, no_repeat_ngram_size=None,
                    repetition_penalty=None, **options):
    """A Translator with a run's decoding settings (a `config.DecodingSettings`;
    beam size, alpha and the guards overridable; None keeps the run's);
    `options` (n_best, sampling, greedy) go to `Translator`. `model` may be a
    list (an ensemble)."""
    def given(value, default):
        return default if value is None else value

    return Translator(
        model, tokenizer,
        beam_size=given(beam_size, decoding.beam_size),
        alpha=given(alpha, decoding.alpha),
        max_input_length=decoding.max_input_length,
        extra_length=decoding.extra_length,
        no_repeat_ngram_size=given(no_repeat_ngram_size, decoding.no_repeat_ngram_size),
        repetition_penalty=given(repetition_penalty, decoding.repetition_penalty),
        **options,
    )
