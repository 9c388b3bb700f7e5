"""`scripts/export.py` (SavedModel or CTranslate2) and `scripts/average_checkpoints.py`."""

import os
import sys

from keras_transformer.cli.common import decoding_flags, make_parser, restored_translator


def export_main(argv=None):
    parser = make_parser(
        "export.py",
        "Export a trained model: a TF Serving SavedModel to <output>/<next version>/, or a CTranslate2 "
        "model directory (with the run's SentencePiece model) to <output>/.",
    )
    parser.add_argument("--model-dir", required=True, help="The training model directory.")
    parser.add_argument("--output", required=True,
                        help="saved_model: the model base path, e.g. saved_models/NAME; ctranslate2: the new "
                        "directory, e.g. ct2_models/NAME (it must not exist).")
    parser.add_argument("--format", default="saved_model", choices=["saved_model", "ctranslate2"],
                        help="saved_model for TF Serving; ctranslate2 for CTranslate2's C++/Python runtime "
                        "(needs the ctranslate2 extra: pip install -e \".[ctranslate2]\").")
    parser.add_argument("--quantization", default=None, choices=["int8", "int8_float32", "float16", "float32"],
                        help="ctranslate2 only: the stored weight type (default int8: 4x smaller than float32; "
                        "faster than float32 only on some CPUs, docs/results.md).")
    parser.add_argument("--n-best", type=int, default=1,
                        help="saved_model only: hypotheses per sentence, at most the beam size. Above 1, "
                        "serving_default returns translations string [B, N] and scores float32 [B, N], best "
                        "first, and translate_ids returns ids int32 [B, N, L].")
    decoding_flags(parser)
    args = parser.parse_args(argv)
    if args.quantization is not None and args.format != "ctranslate2":
        parser.error(f"--quantization applies to --format ctranslate2; got --format {args.format}.")
    if args.n_best != 1 and args.format != "saved_model":
        parser.error(f"--n-best applies to --format saved_model; got --format {args.format}.")
    if args.n_best < 1:
        parser.error(f"--n-best must be at least 1; got {args.n_best}.")
    _, translator = restored_translator(parser, args, n_best=args.n_best)
    if args.format == "ctranslate2":
        from keras_transformer.export import ctranslate2  # noqa: PLC0415

        try:
            path = ctranslate2.export_translator_ctranslate2(translator, args.output,
                                                                    args.quantization or "int8")
        except ImportError:
            parser.exit(1, 'export.py: error: --format ctranslate2 needs the ctranslate2 package: '
                           'pip install -e ".[ctranslate2]"\n')
        except ValueError as error:
            parser.exit(1, f"export.py: error: {error}\n")
    else:
        from keras_transformer.export import saved_model  # noqa: PLC0415

        path = saved_model.export_translator(translator, args.output)
    print(path)
    print(f"computing in {translator.models[0].dtype_policy.name}", file=sys.stderr)
    return 0


def average_main(argv=None):
    parser = make_parser(
        "average_checkpoints.py",
        "Average the weights of the last N checkpoints of a run (the paper: 5 for base, 20 for big).",
    )
    parser.add_argument("--model-dir", required=True, help="The training model directory.")
    parser.add_argument("--last", type=int, default=5, help="How many of the newest checkpoints to average.")
    parser.add_argument("--output", required=True, help="The averaged .weights.h5 file to write.")
    args = parser.parse_args(argv)
    from keras_transformer.run_dir import RunDir  # noqa: PLC0415
    from keras_transformer.training import checkpoints  # noqa: PLC0415

    if args.last < 1:
        parser.error(f"--last must be at least 1; got {args.last}.")
    if not args.output.endswith(".weights.h5"):
        parser.error(f"--output must end in .weights.h5; got {args.output!r}.")
    found = RunDir(args.model_dir).checkpoints()
    if len(found) < args.last:
        parser.exit(1, f"average_checkpoints.py: error: asked for the last {args.last} checkpoints but "
                       f"{args.model_dir!r} has {len(found)}; raise --keep-checkpoints when training.\n")
    chosen = found[-args.last:]
    checkpoints.average_checkpoints(chosen, args.output)
    print(f"Averaged {len(chosen)} checkpoints ({os.path.basename(chosen[0])} .. "
          f"{os.path.basename(chosen[-1])}) into {args.output}")
    return 0
