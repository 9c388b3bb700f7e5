"""The end-to-end recipe that `scripts/train.py` runs: train, choose the model, test, export.

`train_and_evaluate(config)` is the paper's whole procedure as one command:
1. train (or resume) with `trainer.train`, scoring validation BLEU after
   every checkpoint interval and keeping the best checkpoint;
2. average the last `config.average_last` kept checkpoints and score the
   last, the averaged and the best on the validation set with the run's
   beam search (`model_choice.choose_model`);
3. score the chosen model on the test split with sacreBLEU, chrF and
   sentence-level exact match, and show a few examples;
4. export it as a SavedModel for TF Serving.
"""

import time

from keras_transformer.data import sources
from keras_transformer.decoding import evaluation
from keras_transformer.decoding.restore import make_translator
from keras_transformer.export import saved_model
from keras_transformer.run_dir import RunDir
from keras_transformer.training import distribution, model_choice, trainer


def _print_scores(label, scores):
    print(f"{label:<22s} sacreBLEU {scores['bleu']:6.2f}  chrF {scores['chrf']:6.2f}  "
          f"exact match {scores['exact_match']:5.1f}%")


def train_and_evaluate(config, examples=5):
    """Returns a dict with the test scores, the model choice, the hypotheses
    path and the export path. `config` is the whole `RunConfig`; each step
    gets its section."""
    start = time.perf_counter()
    model, tokenizer, strategy, _ = trainer.train(config)
    is_chief, _ = distribution.worker_role(strategy)
    result = {"train_seconds": time.perf_counter() - start}
    if not is_chief:
        return result
    run_dir, data = RunDir(config.model_dir), config.data
    translator = make_translator(config.decoding, model, tokenizer)

    def translate(sentences):  # with a progress line on stderr: three candidates can take minutes
        return translator.translate(sentences)[0]

    sentences, references = sources.read_split(data, "validation", limit=config.bleu_sentences or None)
    print(f"\nChoosing the model on {len(sentences)} validation sentences (beam {config.beam_size}):")
    choice = model_choice.choose_model(run_dir, model, translate, sentences, references, config.average_last)
    for name in model_choice.CANDIDATES:
        if name in choice["scores"]:
            _print_scores(f"  {name}" + (" (chosen)" if name == choice["chosen"] else ""), choice["scores"][name])
    result["model_choice"], result["chosen"] = choice["scores"], choice["chosen"]

    sentences, references = sources.read_split(data, "test")
    scores = evaluation.evaluate(translator, sentences, references, run_dir.hypotheses_path("test"))
    print(f"\nTest set: {len(sentences)} sentences, {choice['chosen']} model")
    print(f"sacreBLEU {scores['bleu']:.2f}  ({scores['bleu_signature']})")
    print(f"chrF      {scores['chrf']:.2f}  ({scores['chrf_signature']})")
    print(f"exact match {scores['exact_match']:.1f}% of sentences")
    print(f"Hypotheses written to {scores['hypotheses_path']}")
    for source, hypothesis, reference in list(zip(sentences, scores["hypotheses"], references))[:examples]:
        print(f"\n  source:    {source}\n  output:    {hypothesis}\n  reference: {reference}")
    result.update({k: v for k, v in scores.items() if k != "hypotheses"})
    if config.export_dir:
        result["export_path"] = saved_model.export_translator(translator, config.export_dir)
        print(f"\nSavedModel exported to {result['export_path']} (computing in {model.dtype_policy.name})")
    result["total_seconds"] = time.perf_counter() - start
    print(f"Done in {result['total_seconds'] / 60:.1f} minutes.")
    return result
