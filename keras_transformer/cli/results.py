"""`scripts/make_results.py`: the docs' tables of figures, built from the records in results/.

Every published figure lives in a record its command wrote (`cli.records`).
This builds, from the records of a folder:
- the README's Results table, between its `<!-- results -->` and
  `<!-- /results -->` lines: a row per command of the presets' own models
  (other depths and other machines are on the results page only), naming
  CPU, precision and command, with the latest run's figures and the spread
  of the runs on its machine;
- docs/results.md, the evidence page: the budgeted runs by corpus (the
  recipe's choices against each setting tried in their place, `by_shape`),
  then every record's figures by kind and command, dev and test scores
  apart, and the spread of repeated runs.
`--check` writes nothing and fails when a page differs from what it builds;
tests/test_docs.py does the same.
"""

import argparse
import collections
import os
import re
import shlex
import sys

from keras_transformer.cli import records
from keras_transformer.modeling import presets

BEGIN, END = "<!-- results -->", "<!-- /results -->"
PAGE = os.path.join("docs", "results.md")


def machine(record):
    """The CPU (or GPUs) a record's figures were measured on, in a few words."""
    found = record["machine"]
    cpu = f"{found['cpu']} (family {found['family']}, model {found['model']}"
    cpu += f"; {' '.join(found['flags'])})" if found["flags"] else ")"
    gpus = f", {len(found['gpus'])} GPU: {', '.join(sorted(set(found['gpus'])))}" if found["gpus"] else ""
    return f"{cpu}, {found['threads']} threads{gpus}"


def _scores(scores, label, sentences):
    if not scores:
        return ""
    exact = f", exact match {scores['exact_match']:.1f}%" if "exact_match" in scores else ""
    return (f"{label} sacreBLEU {scores['bleu']:.2f}, chrF {scores['chrf']:.2f}{exact} "
            f"({scores.get('sentences', sentences):,})")


def what(record):
    """A record's row title: what was measured, on what."""
    figures, corpus = record["figures"], record["corpus"]
    name = os.path.basename(str(corpus.get("dataset")))
    sentences = (f"{corpus.get('sentences')} sentences of its run's test split" if corpus.get("split") == "test"
                 else f"{corpus.get('sentences')} sentences of {name}")
    if record["kind"] == "train":
        trained = (f"{figures['time_budget']}-minute budget" if figures["time_budget"] else
                   f"{figures['preset']} preset, {figures['steps']:,} updates")
        layers = "" if presets_model(record) else ", {}+{} layers".format(*figures["layers"])
        return f"Training on {name}: {trained}{layers}"
    if record["kind"] == "evaluate":
        data = "its run's" if corpus.get("from_run", True) else f"{name}'s"
        return f"The model of {corpus['model_dir']} on {data} {corpus['split']} split"
    if record["kind"] == "serving":
        layers = " ({}+{} layers)".format(*figures["layers"]) if "layers" in figures else ""
        return f"Serving: the {figures['preset']} model{layers} of {corpus['model_dir']}, beam " \
               f"{figures['beam_size']}, {sentences}"
    if record["kind"] == "constrained":
        return f"Constrained search: the model of {corpus['model_dir']}, {sentences}, two constraints each"
    if record["kind"] == "speed":
        return f"Speed: the {figures['preset']} preset on synthetic batches"
    if record["kind"] == "eole":
        return f"Against eole on {name}: {figures['time_budget']} minutes a run, the {figures['preset']} size"
    return f"oneDNN kernels: the {figures['preset']} preset in float32"


def _scored(record):
    sentences = record["corpus"].get("sentences")
    return "; ".join(part for part in (_scores(record.get("test"), "test", sentences),
                                       _scores(record.get("dev"), "dev", sentences)) if part)


def _train(record, figures):
    return (f"{_scored(record)}; {figures['updates']:,} updates, {figures['total_minutes']:.1f} minutes in all "
            f"({figures['model']} checkpoint, alpha {figures['alpha']:g})")


def _evaluate(record, figures):
    return _scored(record) or "; ".join(  # with a glossary: both decodes and their term use
        f"{label}: sacreBLEU {figures[label]['bleu']:.2f}, chrF {figures[label]['chrf']:.2f}, term use "
        f"{figures[label]['term_use']:.2f}%" for label in ("unconstrained", "constrained"))


def _serving(record, figures):
    ours = figures["SavedModel"]
    text = f"SavedModel: batch 1 {ours['batch1_ms']:.1f} ms/sentence, batch {figures['batch_size']} " \
           f"{ours['batched_per_s']:.1f} sentences/s"
    ratio = figures.get("SavedModel / CTranslate2 float32")
    if ratio:
        text += f"; **{ratio['batch1']:.2f}×** and **{ratio['batched']:.2f}×** CTranslate2 float32's " \
                f"speed ({figures['CTranslate2 float32']['batch1_ms']:.1f} ms, " \
                f"{figures['CTranslate2 float32']['batched_per_s']:.1f} sentences/s, 2 threads)"
    int8 = figures.get("SavedModel / CTranslate2 int8")
    if int8:
        text += f", {int8['batch1']:.2f}× and {int8['batched']:.2f}× int8's"
    baseline = figures.get("SavedModel / Baseline SavedModel")
    if baseline:
        text += f"; **{baseline['batch1']:.2f}×** and **{baseline['batched']:.2f}×** the speed of the SavedModel " \
                "of {} ({}+{} layers), timed in the same rounds".format(figures["baseline"],
                                                                        *figures["baseline_layers"])
    same = [f"{figures[f'{name} = SavedModel']} {label}" for name, label in (
        ("CTranslate2 float32", "with its own length penalty"), ("CTranslate2 float32 reranked", "reranked"))
        if f"{name} = SavedModel" in figures]
    if same:
        text += f"; CTranslate2 float32 translates as the SavedModel does {' and '.join(same)} of " \
                f"{record['corpus']['sentences']}"
    return text


def _speed(record, figures):
    parts = []
    if "float32_vs_keras_hub" in figures:
        parts.append(f"training float32 {figures['train_float32_tokens_per_s']:.0f} target tokens/s, "
                     f"**{figures['float32_vs_keras_hub']:.2f}×** keras-hub's "
                     f"{figures['train_keras_hub_float32_tokens_per_s']:.0f}; mixed_bfloat16 "
                     f"{figures['train_mixed_bfloat16_tokens_per_s']:.0f}, "
                     f"**{figures['bfloat16_vs_keras_hub_float32']:.2f}×**")
    parts.append(f"cached beam search **{figures['decode_cached_vs_uncached']:.2f}×** uncached")
    if "ours_best_vs_ctranslate2_float32" in figures:
        parts.append(f"beam search (best of our precisions) **{figures['ours_best_vs_ctranslate2_float32']:.2f}×** "
                     f"CTranslate2 float32's output tokens/s, **{figures['ours_best_vs_ctranslate2_int8']:.2f}×** "
                     "its int8's")
    return "; ".join(parts)


def _constrained(record, figures):
    plain, constrained, ratio = figures["beam search"], figures["constrained"], figures["ratio"]
    return (f"term use {plain['term_use']:.2f}% without constraints, {constrained['term_use']:.2f}% with; "
            f"constrained search takes **{ratio['batch1']:.2f}×** beam search's time at batch 1 "
            f"({constrained['batch1_ms']:.1f} against {plain['batch1_ms']:.1f} ms/sentence) and "
            f"**{ratio['batched']:.2f}×** batched ({constrained['batched_per_s']:.1f} against "
            f"{plain['batched_per_s']:.1f} sentences/s)")


def _eole(record, figures):
    ours, eole = figures["ours"], figures["eole"]

    def times(a, b):
        return f"**{a / b:.2f}×**" if b > 0 else "no ratio"

    return (f"test sacreBLEU {ours['bleu']:.2f} against eole's {eole['bleu']:.2f} "
            f"({times(ours['bleu'], eole['bleu'])}), "
            f"chrF {ours['chrf']:.2f} against {eole['chrf']:.2f} ({times(ours['chrf'], eole['chrf'])}); "
            f"{ours['updates']:,} and {eole['updates']:,} updates")


def _onednn(record, figures):
    return (f"oneDNN on against off: training **{figures['train_ratio']:.2f}×**, beam search "
            f"**{figures['decode_ratio']:.2f}×**")


_FIGURES = {"train": _train, "evaluate": _evaluate, "serving": _serving, "speed": _speed,
            "constrained": _constrained, "eole": _eole, "onednn": _onednn}


def figures_text(record):
    """A record's headline figures in a sentence."""
    return _FIGURES[record["kind"]](record, record["figures"])


def _cell(text):
    return " ".join(str(text).split()).replace("|", "\\|")


def presets_model(record):
    """Whether a record's model has its preset's depths (or names none)."""
    layers = record["figures"].get("layers")
    return layers is None or tuple(layers) == presets.depths(presets.get_preset(record["figures"]["preset"]))


def _without(words, flags):
    """`words` (a command's, split) less each of `flags` and its value."""
    kept = []
    while words:
        word, words = words[0], words[1:]
        if word.split("=")[0] in flags:
            if "=" not in word and words and not words[0].startswith("--"):
                words = words[1:]
            continue
        kept.append(word)
    return kept


def shown_command(record):
    """A record's command as the pages show and group it: a training run's
    without `--model-dir`, which says where it was written, not what it did
    (elsewhere, as in evaluate.py, it names the model measured, and stays)."""
    if record["kind"] != "train":
        return record["command"]
    return shlex.join(_without(shlex.split(record["command"]), ("--model-dir",)))


def by_command(found):
    """The records grouped by command, CPU and precision, in their order."""
    groups = collections.defaultdict(list)
    for record in found:
        groups[(shown_command(record), machine(record), record["precision"])].append(record)
    return groups


def readme_table(found):
    """The README's Results table: a row per command of training, serving and
    speed that ran a preset's own model, with its latest run's figures and
    the spread of the runs on that run's machine and precision. Other
    machines' runs, and budgeted runs that tried a setting in the recipe's
    place (`setting`), are on the results page only."""
    rows = ["| what | figures | CPU | precision | command |", "|---|---|---|---|---|"]
    chosen = [r for r in found if r["kind"] in ("train", "serving", "speed", "onednn", "eole") and presets_model(r)
              and not (r["kind"] == "train" and r["figures"].get("time_budget") and setting(r["command"]))]
    groups = by_command(chosen)
    latest = {}  # command: the key of the group holding its latest record (in the place of its first)
    for record in chosen:
        key = (shown_command(record), machine(record), record["precision"])
        latest[key[0]] = key
    for command, cpu, precision in latest.values():
        group = groups[(command, cpu, precision)]
        figures = figures_text(group[-1]) + (f"; spread: {spreads(group)}" if spreads(group) else "")
        rows.append("| " + " | ".join(_cell(cell) for cell in (what(group[-1]), figures, cpu, precision,
                                                                 f"`{command}`")) + " |")
    return "\n".join(rows) + "\n"


def spread(group, key):
    """"a–b over n runs" of the test (or dev) sacreBLEU of records that ran one command on one machine."""
    values = [record[key]["bleu"] for record in group if record.get(key)]
    if len(values) < 2:
        return ""
    return f"{min(values):.2f}–{max(values):.2f} over {len(values)} runs"


def spreads(group):
    """The test and dev spreads of a group of records, or ""."""
    return "; ".join(f"{label} sacreBLEU {text}" for label, text in
                     (("test", spread(group, "test")), ("dev", spread(group, "dev"))) if text)


# A budgeted run's command, less these flags (and their values), is the
# setting it tried: nothing left is the recipe's own choices.
_SHARED_FLAGS = ("--dataset", "--test", "--time-budget", "--record", "--model-dir")


def setting(command):
    """The flags a training command adds to its corpus, budget and record: what it tried."""
    return " ".join(_without(shlex.split(command)[2:], _SHARED_FLAGS))  # past "python scripts/train.py"


def _range(values, form="{:.2f}"):
    """"low–high" of `values` in `form`, one value alone, or ""."""
    low, high = (form.format(min(values)), form.format(max(values))) if values else ("", "")
    return low if low == high else f"{low}–{high}"


def by_shape(found):
    """docs/results.md's evidence of the recipe's rules: for each corpus and
    budget (on one CPU and precision), a row per setting tried, the
    recipe's own choices first, with its runs' dev and test sacreBLEU."""
    groups = collections.defaultdict(lambda: collections.defaultdict(list))
    for record in found:
        if record["kind"] == "train" and record["figures"].get("time_budget"):
            shape = (os.path.basename(str(record["corpus"]["dataset"])), record["figures"]["time_budget"],
                     machine(record), record["precision"])
            groups[shape][setting(record["command"])].append(record)
    lines = []
    for (corpus, minutes, cpu, precision), settings in groups.items():
        lines += [f"### {corpus} at {minutes} minutes", "", f"{cpu}, {precision}.", "",
                  "| setting | runs | dev sacreBLEU | test sacreBLEU | updates |", "|---|---|---|---|---|"]
        for name in sorted(settings, key=lambda name: (name != "", name)):
            runs = settings[name]
            cells = (f"`{name}`" if name else "the recipe's choices", len(runs),
                     _range([r["dev"]["bleu"] for r in runs if r.get("dev")]),
                     _range([r["test"]["bleu"] for r in runs if r.get("test")]),
                     _range([r["figures"]["updates"] for r in runs], "{:,}"))
            lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
        lines.append("")
    return lines


def page(found):
    """docs/results.md: every record, by kind and corpus."""
    lines = ["# Results", "", "```bash", "python scripts/make_results.py", "```", "",
             "Every figure the README and these pages publish, as the records in `results/` hold it: one JSON "
             "file per run, written by the command beside it (`--record results`), with the commit, CPU and "
             "precision it ran with. `python scripts/make_results.py` builds this page and the README's "
             "Results table from them; a test fails when either differs. Dev scores are the validation "
             "sentences the run chose its checkpoint and length penalty on; test scores are of sentences "
             "it never saw.", ""]
    shapes = by_shape(found)
    if shapes:
        lines += ["## Budgeted training by corpus", "",
                  "The recipe's choices against the settings tried in their place, each on the corpus and budget "
                  "it ran, with the range of its runs (dev: the validation sentences the run chose on, 200 under a "
                  "budget). The commands that cut the corpora are in [training](training.md#how-the-rules-are-"
                  "chosen-dev-then-test).", ""] + shapes
    by_kind = collections.defaultdict(list)
    for record in found:
        by_kind[record["kind"]].append(record)
    for kind in records.KINDS:
        if not by_kind[kind]:
            continue
        lines += [f"## {kind.capitalize()}", ""]
        for (command, cpu, precision), group in by_command(by_kind[kind]).items():
            lines += [f"`{command}`", "", f"{cpu}, {precision}.", "", "| date | commit | what | figures |",
                      "|---|---|---|---|"]
            lines += [f"| {record['date'][:10]} | {(record['commit'] or 'none')[:12]} | {_cell(what(record))} | "
                      f"{_cell(figures_text(record))} |" for record in group]
            lines += ["", f"Spread: {spreads(group)}."] if spreads(group) else []
            lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def with_table(readme, table):
    """`readme` with the text between its results markers replaced by `table`."""
    pattern = re.compile(re.escape(BEGIN) + r"\n.*?" + re.escape(END), re.S)
    if not pattern.search(readme):
        raise ValueError(f"The README has no {BEGIN} ... {END} lines to put the Results table between.")
    return pattern.sub(lambda _: f"{BEGIN}\n{table}{END}", readme)


def built(root, folder):
    """{path: text} of the pages as the records of `folder` make them."""
    found = records.read_all(folder)
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return {"README.md": with_table(readme, readme_table(found)), PAGE: page(found)}


def results_main(argv=None):
    parser = argparse.ArgumentParser(prog="make_results.py", description=(
        "Build the README's Results table and docs/results.md from the records in results/ (run it from the "
        "repository's top folder)."))
    parser.add_argument("--records", default="results", help="The folder of records (default: %(default)s).")
    parser.add_argument("--check", action="store_true",
                        help="Write nothing; exit 1 naming each page that differs from what the records make.")
    args = parser.parse_args(argv)
    try:
        pages = built(".", args.records)
    except (OSError, ValueError) as error:
        parser.exit(1, f"make_results.py: error: {error}\n")
    stale = []
    for path, text in pages.items():
        current = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if current != text:
            stale.append(path)
            if not args.check:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
    if args.check and stale:
        print(f"make_results.py: {', '.join(stale)} differ from what {args.records}/ makes; run "
              "python scripts/make_results.py", file=sys.stderr)
        return 1
    print(f"{len(pages)} pages built from {args.records}/" + (f", {len(stale)} rewritten" if stale else ""))
    return 0
