"""Quality of translations against references: sacreBLEU, chrF and sentence-level
exact match, on detokenized output, and `evaluate`, which translates and scores."""

import os

import sacrebleu


def score(hypotheses, references):
    """sacreBLEU BLEU and chrF of detokenized `hypotheses` against one reference each.

    Returns a dict with "bleu", "bleu_signature", "chrf", "chrf_signature"
    and "exact_match" (percent).
    """
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references.")
    bleu = sacrebleu.metrics.BLEU()
    chrf = sacrebleu.metrics.CHRF()
    bleu_score = bleu.corpus_score(hypotheses, [references])
    chrf_score = chrf.corpus_score(hypotheses, [references])
    return {
        "bleu": bleu_score.score,
        "bleu_signature": str(bleu.get_signature()),
        "chrf": chrf_score.score,
        "chrf_signature": str(chrf.get_signature()),
        "exact_match": exact_match(hypotheses, references),
    }


def exact_match(hypotheses, references):
    """Percentage of hypotheses equal to their reference (surrounding spaces
    ignored): on a corpus of numbers and dates, one wrong word makes a
    translation wrong however little BLEU it costs."""
    if not hypotheses:
        return 0.0
    return 100.0 * sum(h.strip() == r.strip() for h, r in zip(hypotheses, references)) / len(hypotheses)


def evaluate(translator, sentences, references, hypotheses_path=None, batch_size=64, constraints=None,
             prefixes=None):
    """Translates `sentences` (with `constraints` and `prefixes`, as
    `Translator.translate` takes them), scores them, and writes the
    hypotheses one per line.

    Returns the `score` dict plus "hypotheses" (list) and "hypotheses_path".
    """
    terms = {} if constraints is None and prefixes is None else {"constraints": constraints, "prefixes": prefixes}
    hypotheses = translator.translate(sentences, batch_size=batch_size, **terms).best
    result = score(hypotheses, references)
    if hypotheses_path:
        os.makedirs(os.path.dirname(os.path.abspath(hypotheses_path)), exist_ok=True)
        with open(hypotheses_path, "w", encoding="utf-8") as f:
            f.writelines(h.replace("\n", " ") + "\n" for h in hypotheses)
    result.update(hypotheses=hypotheses, hypotheses_path=hypotheses_path)
    return result
