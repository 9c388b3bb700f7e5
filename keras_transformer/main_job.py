"""The main job (`scripts/train.py`): train, choose the model, test, export.

`train_and_evaluate(config)` is the paper's whole procedure as one command:
1. train (or resume) with `training.train`, scoring validation BLEU after
   every checkpoint interval and keeping the best checkpoint;
2. average the last `config.average_last` kept checkpoints and score the
   last, the averaged and the best on the validation set with the run's
   beam search (`model_selection.choose_model`);
3. score the chosen model on the test split with sacreBLEU, chrF and
   sentence-level exact match, and show a few examples;
4. export it as a SavedModel for TF Serving.
"""

import os
import time

from keras_transformer import evaluation, export, model_selection, training


def _print_scores(label, scores):
    print(f"{label:<22s} sacreBLEU {scores['bleu']:6.2f}  chrF {scores['chrf']:6.2f}  "
          f"exact match {scores['exact_match']:5.1f}%")


def train_and_evaluate(config, examples=5):
    """Returns a dict with the test scores, the model choice, the hypotheses
    path and the export path."""
    start = time.perf_counter()
    model, tokenizer, strategy, _ = training.train(config)
    is_chief, _ = training.worker_role(strategy)
    result = {"train_seconds": time.perf_counter() - start}
    if not is_chief:
        return result
    translator = training.make_translator(config, model, tokenizer)

    def translate(sentences):  # with a progress line on stderr: three candidates can take minutes
        return translator.translate(sentences)[0]

    sentences, references = evaluation.read_split(config, "validation", limit=config.bleu_sentences or None)
    print(f"\nChoosing the model on {len(sentences)} validation sentences (beam {config.beam_size}):")
    choice = model_selection.choose_model(config.model_dir, model, translate, sentences, references,
                                          config.average_last)
    for name in model_selection.CANDIDATES:
        if name in choice["scores"]:
            _print_scores(f"  {name}" + (" (chosen)" if name == choice["chosen"] else ""), choice["scores"][name])
    result["model_choice"], result["chosen"] = choice["scores"], choice["chosen"]

    sentences, references = evaluation.read_split(config, "test")
    scores = evaluation.evaluate(translator, sentences, references,
                                 os.path.join(config.model_dir, "test.hypotheses.txt"))
    print(f"\nTest set: {len(sentences)} sentences, {choice['chosen']} model")
    print(f"sacreBLEU {scores['bleu']:.2f}  ({scores['bleu_signature']})")
    print(f"chrF      {scores['chrf']:.2f}  ({scores['chrf_signature']})")
    print(f"exact match {scores['exact_match']:.1f}% of sentences")
    print(f"Hypotheses written to {scores['hypotheses_path']}")
    for source, hypothesis, reference in list(zip(sentences, scores["hypotheses"], references))[:examples]:
        print(f"\n  source:    {source}\n  output:    {hypothesis}\n  reference: {reference}")
    result.update({k: v for k, v in scores.items() if k != "hypotheses"})
    if config.export_dir:
        result["export_path"] = export.export_translator(translator, config.export_dir)
        print(f"\nSavedModel exported to {result['export_path']}")
    result["total_seconds"] = time.perf_counter() - start
    print(f"Done in {result['total_seconds'] / 60:.1f} minutes.")
    return result
