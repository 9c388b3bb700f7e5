"""The main job, end to end: the README's `python scripts/train.py`, run word
for word in a fresh checkout (CI has already run its `pip install -e .`)."""

import json
import os
import re
import time

import pytest

from tests.helpers.docs import PAGES, bash, docs_block, docs_command, docs_table, make_checkout, page_text


# Sentence-level exact match on the 1,000 test sentences that the default run must reach (issue 12).
EXACT_MATCH_FLOOR = 98.0


@pytest.mark.slow
@pytest.mark.first
def test_default_run_trains_scores_exports_and_shows_examples(tmp_path):
    """It reaches sacreBLEU >= 90 and exact match >= 98% on the built-in test split, shows its
    progress and examples, its export in saved_models/ serves, the documented
    attention command works on the model it leaves in runs/, and that model's
    int8 CTranslate2 export scores within 1 BLEU of its float32 one."""
    _, command = docs_command(r"^pip install -e \. && python scripts/train\.py$").split(" && ")
    assert command == "python scripts/train.py"
    checkout = make_checkout(tmp_path)
    start = time.time()
    result = bash(checkout, command, timeout=3600)
    minutes = (time.time() - start) / 60
    print(result.stdout[-2500:])
    print(f"main job took {minutes:.1f} minutes")
    bleu = float(re.search(r"^sacreBLEU (\d+\.\d+)  \(nrefs:1\|", result.stdout, re.M).group(1))
    assert bleu >= 90.0
    assert re.search(r"^chrF      \d+\.\d+", result.stdout, re.M)
    exact = float(re.search(r"^exact match (\d+\.\d)% of sentences$", result.stdout, re.M).group(1))
    assert exact >= EXACT_MATCH_FLOOR
    # BLEU while training, the best and averaged checkpoints, and a choice that follows validation BLEU.
    run = checkout / "runs" / "numerals_en_de-small"
    scores = json.loads((run / "checkpoints" / "validation.json").read_text())["scores"]
    assert sorted(map(int, scores)) == [0, 1, 2, 3] and all(s["val_bleu"] > 0 for s in scores.values())
    assert "val_bleu" in result.stdout and "val_chrf" in result.stdout
    assert (run / "checkpoints" / "best.weights.h5").exists() and (run / "checkpoints" / "average.weights.h5").exists()
    choice = json.loads((run / "model_choice.json").read_text())
    ranked = sorted(choice["scores"], key=lambda n: (choice["scores"][n]["bleu"], choice["scores"][n]["chrf"]))
    assert choice["chosen"] == ranked[-1] and {"last", "average"} <= set(choice["scores"])
    assert choice["alpha"] is None and "Choosing its length penalty" not in result.stdout  # no budget: the paper's
    for name, figures in choice["scores"].items():
        assert re.search(rf"^  {name}( \(chosen\))? +sacreBLEU +{figures['bleu']:.2f}  ", result.stdout, re.M)
    assert "tokens_per_sec" in result.stdout and "sec_per_step" in result.stdout  # progress is visible
    assert result.stdout.count("  reference: ") >= 3  # examples next to their references
    assert os.path.exists(checkout / "runs" / "numerals_en_de-small" / "test.hypotheses.txt")
    # Every translation the pages show is what this run prints, word for word:
    # the first translate command, the export's Python block and the table.
    pages = "\n".join(page_text(page) for page in PAGES)
    shown = re.search(r"the first command prints `(.+?)`", pages).group(1)
    from_run = bash(checkout, docs_command(r"^echo .* \| python scripts/translate\.py --model (?!ct2_models/)"))
    assert from_run.stdout == shown + "\n"
    block = docs_block("tf.saved_model.load(")
    (checkout / "load_export.py").write_text(block, encoding="utf-8")
    printed = bash(checkout, "python load_export.py").stdout.strip().splitlines()[-1]
    assert printed == re.search(r"  # (\[.*\])$", block, re.M).group(1) == str([shown])
    table = docs_table("| sentences.txt | translations.txt |")
    assert len(table) >= 8
    (checkout / "sentences.txt").write_text("".join(source + "\n" for source, _ in table), encoding="utf-8")
    bash(checkout, docs_command(r"^python scripts/translate\.py --model saved_models/numerals_en_de "))
    assert (checkout / "translations.txt").read_text(encoding="utf-8").splitlines() == [out for _, out in table]

    # The translating page's attention command, on this model, writes the files it names.
    printed = bash(checkout, docs_command(r"^python scripts/plot_attention\.py ")).stdout.split()
    assert printed == [f"attention/layer_{i}.png" for i in range(3)]  # small preset: 3 decoder layers
    assert (checkout / printed[-1]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # Its CTranslate2 export: int8 weights translate the test split within 1 BLEU of float32.
    from keras_transformer.data import sources
    from keras_transformer.decoding import evaluation
    from keras_transformer.export.ctranslate2_translator import CTranslate2Translator
    from keras_transformer.modeling.precision import resolve_precision
    from keras_transformer.run_dir import RunDir

    # The run records the precision it trained in, and its export says it computes in it.
    config = RunDir(run).load_config()
    assert config.precision == resolve_precision("auto")
    exported = json.loads((checkout / "saved_models" / "numerals_en_de" / "1" / "assets" / "keras_transformer.json")
                          .read_text())
    assert exported["precision"] == config.precision and exported["beam_size"] == 4

    sentences, references = sources.read_split(config.data, "test")
    bleu = {}
    for quantization in ("float32", "int8"):
        output = checkout / "ct2" / quantization
        bash(checkout, "python scripts/export.py --model-dir runs/numerals_en_de-small --format ctranslate2 "
                       f"--output {output} --quantization {quantization}")
        bleu[quantization] = evaluation.evaluate(CTranslate2Translator(str(output)), sentences, references)["bleu"]
    print(f"CTranslate2 test BLEU: float32 {bleu['float32']:.2f}, int8 {bleu['int8']:.2f}")
    assert bleu["float32"] >= 90.0 and abs(bleu["int8"] - bleu["float32"]) <= 1.0


def test_auto_precision_keeps_the_policy_a_resumed_run_recorded(tmp_path, monkeypatch):
    """On other hardware "auto" would resolve otherwise; a resumed run keeps
    computing as it trained. An explicit --precision is a choice, and wins."""
    from keras_transformer.config import RunConfig
    from keras_transformer.run_dir import RunDir
    from keras_transformer.training import recipe

    monkeypatch.setattr(recipe, "resolve_precision", lambda p: "float32" if p == "auto" else p)
    run_dir = RunDir(tmp_path / "run")
    assert recipe.resolved_precision(RunConfig(), run_dir) == "float32"  # a new run: this machine's choice
    run_dir.save_config(RunConfig(precision="mixed_bfloat16", model_dir=str(tmp_path / "run")))
    assert recipe.resolved_precision(RunConfig(), run_dir) == "mixed_bfloat16"
    assert recipe.resolved_precision(RunConfig(precision="mixed_float16"), run_dir) == "mixed_float16"


def test_a_run_recorded_without_a_block_placement_resumes_with_its_presets(tmp_path):
    """A run that recorded norm_first None built its preset's post-norm
    blocks: --no-norm-first resumes it, --norm-first (another model) is refused."""
    from keras_transformer.config import RunConfig
    from keras_transformer.run_dir import RunDir
    from keras_transformer.training import recipe

    run_dir = RunDir(tmp_path / "run")
    recorded = RunConfig(model_dir=str(tmp_path / "run"), preset="tiny", precision="float32")
    run_dir.save_config(recorded)
    recipe.prepare_run_dir(RunConfig(**{**recorded.to_dict(), "norm_first": False}), run_dir)
    assert run_dir.load_config().norm_first is False
    with pytest.raises(ValueError, match=r"--norm-first False -> True"):
        recipe.prepare_run_dir(RunConfig(**{**recorded.to_dict(), "norm_first": True}), run_dir)


def test_a_run_recorded_without_depths_resumes_with_its_presets_own(tmp_path):
    """The tiny preset has 2 layers a side: --decoder-layers 2 resumes a run that
    recorded none, --decoder-layers 1 (another model) is refused."""
    from keras_transformer.config import RunConfig
    from keras_transformer.run_dir import RunDir
    from keras_transformer.training import recipe

    run_dir = RunDir(tmp_path / "run")
    recorded = RunConfig(model_dir=str(tmp_path / "run"), preset="tiny", precision="float32")
    run_dir.save_config(recorded)
    recipe.prepare_run_dir(RunConfig(**{**recorded.to_dict(), "decoder_layers": 2}), run_dir)
    assert run_dir.load_config().decoder_layers == 2
    with pytest.raises(ValueError, match=r"--decoder-layers 2 -> 1"):
        recipe.prepare_run_dir(RunConfig(**{**recorded.to_dict(), "decoder_layers": 1}), run_dir)


@pytest.mark.slow
def test_a_time_budgeted_run_plans_records_stops_and_resumes(tmp_path, small_corpus, capsys):
    """`train.py --time-budget` end to end on the tiny preset: the recipe's
    block, the record of what was spent in the run folder, the last
    checkpoint's update count equal to the record's, a second start that
    resumes the spent budget, and the errors for a conflicting or too small
    budget or a flag the clock replaces. Nothing here depends on how fast
    this machine is."""
    import h5py

    from keras_transformer import cli
    from keras_transformer.run_dir import RunDir
    from keras_transformer.training import budget, model_choice
    from tests.conftest import run_entry_point, write_tsv

    train, test = small_corpus
    corpus = write_tsv(tmp_path / "c.tsv", train + test)
    run = str(tmp_path / "run")
    args = ["--dataset", corpus, "--time-budget", "1.5", "--preset", "tiny", "--model-dir", run, "--export-dir", ""]
    code, out, err = run_entry_point(cli.train_main, args, capsys)
    assert code == 0, err
    block = [line.strip() for line in out.split("recipe:\n")[1].split("\n")[:10]]
    assert "preset tiny (your flag)" in block
    assert any(line.startswith("vocab_size 800: ") for line in block)  # 1,6xx word types, halved
    run_dir = RunDir(run)
    record, config = budget.load(run_dir), run_dir.load_config()
    assert (config.vocab_size, config.time_budget) == (800, "1.5")
    assert record.stopped and record.updates >= 1 and record.recipe[0].startswith("vocab_size 800")
    with h5py.File(run_dir.checkpoints()[-1], "r") as f:
        assert int(f["optimizer/vars/0"][()]) == record.updates  # the updates made are the record's
    # A checkpoint at each sixth of training's time (fewer where validations outgrow the budget), the last kept.
    assert 1 <= len(record.validations) <= budget.INTERVALS
    assert len(run_dir.checkpoints()) == min(len(record.validations), config.keep_checkpoints)
    # What each part after training took is recorded (no export here: --export-dir ""), and the command's total.
    assert set(record.parts) == {"choice", "test"} and not record.work.export
    assert record.command_seconds == pytest.approx(record.spent + sum(record.parts.values()), abs=1.0)
    assert budget.describe(record) in out
    # The length penalty was chosen on the validation sentences, and the run records it for the scripts.
    choice = run_dir.read_choice()
    assert choice["alpha"] in model_choice.ALPHAS and config.alpha == choice["alpha"]
    bleu = {float(alpha): scores["bleu"] for alpha, scores in choice["alpha_scores"].items()}
    # How many alphas the budget affords depends on this machine's decode speed (the guard itself is tested on a
    # fake clock in test_budget): they are tried in order, the first always, and the untried ones are named.
    tried = model_choice.ALPHAS[:len(bleu)]
    assert list(bleu) == list(tried) and tried and bleu[choice["alpha"]] == max(bleu.values())
    assert bleu[model_choice.ALPHAS[0]] == choice["scores"][choice["chosen"]]["bleu"]
    assert f"  alpha {choice['alpha']:g} (chosen)" in out
    untried = model_choice.ALPHAS[len(tried):]
    assert (f"  alpha {', '.join(f'{a:g}' for a in untried)} not tried" in out) == bool(untried)

    code, out, err = run_entry_point(cli.train_main, args, capsys)  # started again: the budget is spent
    assert code == 0, err
    assert "Resuming a 1.5-minute budget" in out
    assert budget.load(RunDir(run)).updates == record.updates

    code, _, err = run_entry_point(cli.train_main, [*args[:3], "3", *args[4:]], capsys)
    assert code == 1 and "--time-budget '1.5' -> '3'" in err
    code, _, err = run_entry_point(cli.train_main, [*args[:3], "1s", *args[4:6], "--model-dir",
                                                    str(tmp_path / "short"), "--export-dir", ""], capsys)
    assert code == 1 and "--time-budget 0.0166667 minutes leaves training" in err and "Give at least" in err
    code, _, err = run_entry_point(cli.train_main, [*args, "--checkpoint-every", "50"], capsys)
    assert code == 1 and "--checkpoint-every is for runs without a budget" in err


def test_the_probe_trains_the_runs_model_on_its_own_batches_and_vocabulary(tmp_path, small_corpus, monkeypatch):
    """The recipe's probe times the corpus' real batches, cut where the run
    cuts them, with the run's vocabulary trained into its folder (training
    then uses it); one model per preset, timed at each batch size."""
    from keras_transformer.config import RunConfig
    from keras_transformer.data.tokenizer import Tokenizer
    from keras_transformer.run_dir import RunDir
    from keras_transformer.training import budget, recipe
    from tests.conftest import write_tsv

    train, _ = small_corpus
    corpus = write_tsv(tmp_path / "c.tsv", train)
    run_dir = RunDir(str(tmp_path / "run"))
    probed = []

    def timed(model, batches, **timing):
        (source, _), target = next(iter(batches.take(1)))
        probed.append((model, source.shape[0] * source.shape[1], max(source.shape[1], target.shape[1]),
                       source.numpy()))
        return 0.25

    monkeypatch.setattr(budget, "probe_seconds_per_update", timed)
    config = RunConfig(dataset=corpus, precision="float32", time_budget="5")
    count, sample = recipe.corpus_size.training_sample(config.data, size=50)
    assert count == len(train) - 2 * 50  # less the validation and test pairs held out, 2.5% each
    held_out = {pair for split in ("validation", "test")
                for pair in zip(*recipe.sources.read_split(config.data, split))}
    assert len(sample) == 50 and set(sample) <= set(train) - held_out
    probe = recipe.probe(config, run_dir, sample)
    assert probe("tiny", 400, 1024, 32) == 0.25
    assert probe("tiny", 400, 512, 32) == 0.25
    with pytest.raises(ValueError, match="vocabulary of 400 pieces; it cannot time one of 500"):
        probe("tiny", 500, 512, 32)
    tokenizer = Tokenizer(run_dir.vocabulary_path)
    assert tokenizer.vocab_size == 400
    (first, tokens, longest, ids), (second, tokens_2, longest_2, _) = probed
    assert first is second and first.count_params() == second.count_params()  # built once
    assert first.vocab_size == 400 and first.num_layers == 2  # the tiny preset on the run's vocabulary
    assert tokens <= 1024 and tokens_2 <= 512 and max(longest, longest_2) <= 32  # the run's batches, cut at 32
    decoded = [text.decode("utf-8") for text in tokenizer.detokenize(ids).numpy()]
    assert decoded and set(decoded) <= {s for s, _ in sample}  # the sample's pairs


@pytest.fixture
def plan_on_a_fake_machine(monkeypatch):
    """`plan(config, fixed=())`: `recipe.plan_budget` for a 20,000-pair corpus
    with a 500-sentence test split, on a machine whose probe makes an update
    every 1.25 s, in the config's model_dir."""
    from keras_transformer.data.corpus_size import CorpusSize
    from keras_transformer.run_dir import RunDir
    from keras_transformer.training import recipe

    samples = []  # the sample the corpus is measured on, then the one the probe batches
    monkeypatch.setattr(recipe.corpus_size, "training_sample", lambda data, seed: (20_000, [("a", "b")]))
    monkeypatch.setattr(recipe.corpus_size, "from_pairs",
                        lambda count, sample: samples.append(sample) or CorpusSize(
                            pairs=count, mean_words=19.0, long_words=73, word_types=18_000, batch_words=31.0))
    monkeypatch.setattr(recipe, "probe", lambda config, run_dir, sample: samples.append(sample) or (
        lambda preset, vocab, tokens, max_length: 1.25))
    monkeypatch.setattr(recipe.sources, "read_split", lambda data, split, limit=None: (["a"] * 500, ["b"] * 500))

    def plan(config, fixed=()):
        return recipe.plan_budget(config, RunDir(config.model_dir), time.monotonic(), fixed)

    plan.samples = samples
    return plan


def test_the_corpus_is_measured_and_probed_on_one_sample(tmp_path, plan_on_a_fake_machine):
    """The recipe reads the corpus once for its sample: the probe batches the pairs the corpus was measured on."""
    from keras_transformer.config import RunConfig

    plan_on_a_fake_machine(RunConfig(dataset="c.tsv", time_budget="10", model_dir=str(tmp_path / "a")))
    measured, probed = plan_on_a_fake_machine.samples
    assert measured is probed and measured == [("a", "b")]


def test_a_budgeted_fine_tuning_run_keeps_the_shape_of_the_run_it_starts_from(tmp_path, plan_on_a_fake_machine):
    """With --init-from, the preset and the vocabulary are the source run's: the recipe must not choose them."""
    from keras_transformer.config import RunConfig

    config = RunConfig(dataset="c.tsv", time_budget="30", init_from="runs/general", preset="tiny", vocab_size=500,
                       model_dir=str(tmp_path / "run"))
    planned, record = plan_on_a_fake_machine(config)
    assert (planned.preset, planned.vocab_size) == ("tiny", 500)
    assert "vocab_size 500 (your flag)" in record.recipe and "preset tiny (your flag)" in record.recipe
    assert planned.norm_first is None and "norm_first None (your flag)" in record.recipe  # the source's blocks
    free, _ = plan_on_a_fake_machine(RunConfig(dataset="c.tsv", time_budget="30", model_dir=str(tmp_path / "other")))
    assert (free.vocab_size, free.norm_first) == (8000, True)  # without --init-from the recipe chooses


def test_the_schedule_climbs_as_the_presets_reference_and_cools_down_on_the_clock(tmp_path,
                                                                                   plan_on_a_fake_machine):
    """The recipe's schedule line: the reference climb at the paper's scale,
    the cool-down over the last half of training's time; a flag the user
    gave stays, and says so in the line."""
    from keras_transformer.config import RunConfig
    from keras_transformer.training import auto_config, budget

    chosen, record = plan_on_a_fake_machine(RunConfig(dataset="c.tsv", time_budget="10",
                                                      model_dir=str(tmp_path / "a")))
    reference = auto_config.reference_warmup("small", True)
    assert chosen.norm_first and (chosen.warmup_steps, chosen.learning_rate_scale) == (reference, 1.0)
    assert chosen.cooldown == budget.COOLDOWN_SHARE
    assert record.recipe[-1] == (f"learning rate: warm-up {reference} updates at scale 1, then the inverse square "
                                 f"root, falling linearly to zero over the last {budget.COOLDOWN_SHARE:.0%} of "
                                 f"training's time; a checkpoint at every {budget.INTERVALS}th of it")
    config = RunConfig(dataset="c.tsv", time_budget="10", warmup_steps=800, cooldown=0.3,
                       model_dir=str(tmp_path / "b"))
    given, record = plan_on_a_fake_machine(config, fixed={"warmup_steps", "cooldown"})
    assert (given.warmup_steps, given.cooldown, given.learning_rate_scale) == (800, 0.3, 1.0)
    assert "warm-up 800 updates" in record.recipe[-1] and "over the last 30% of training's time" in record.recipe[-1]


def test_the_record_prices_a_decode_per_length_penalty_the_choice_will_try(tmp_path, plan_on_a_fake_machine):
    """Without --alpha the model choice also tries the length penalties, one
    validation decode each beyond the first: the record's work counts them."""
    from keras_transformer.config import RunConfig
    from keras_transformer.training import model_choice

    _, record = plan_on_a_fake_machine(RunConfig(dataset="c.tsv", time_budget="10", model_dir=str(tmp_path / "a"),
                                                 export_dir=str(tmp_path / "export")))
    assert (record.work.choice, record.work.alphas) == (len(model_choice.CANDIDATES), len(model_choice.ALPHAS) - 1)
    assert record.work.test_sentences == 500 and record.work.export
    config = RunConfig(dataset="c.tsv", time_budget="10", alpha=1.0, model_dir=str(tmp_path / "b"), export_dir="")
    given, record = plan_on_a_fake_machine(config, fixed={"alpha"})
    assert record.work.alphas == 0 and given.alpha == 1.0 and not record.work.export


def test_scheduling_is_a_stage_from_one_frozen_recipe_to_the_next():
    """`scheduled` takes the chosen `Recipe` and returns a new one: the
    schedule in its config, its line after the choice's reasons; the recipe
    it was given is unchanged."""
    import dataclasses

    from keras_transformer.config import RunConfig
    from keras_transformer.training import auto_config, recipe

    chosen = auto_config.Recipe(RunConfig(dataset="c.tsv", preset="small", norm_first=False), ("vocab_size 8000",),
                                0.5)
    made = recipe.scheduled(chosen)
    warmup = auto_config.reference_warmup("small", False)
    assert (made.config.warmup_steps, made.config.learning_rate_scale) == (warmup, 1.0)
    assert made.reasons[0] == "vocab_size 8000" and made.reasons[1].startswith(f"learning rate: warm-up {warmup} ")
    assert made.seconds_per_update == 0.5
    assert chosen.config == RunConfig(dataset="c.tsv", preset="small", norm_first=False)
    assert chosen.reasons == ("vocab_size 8000",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.config = chosen.config


def test_the_model_choice_times_each_decode_after_an_untimed_one_sentence_trace():
    """`DecodeTimer`: the seconds per sentence of the last decode, which the
    budget's guard prices from; before its first decode, an untimed one of
    one sentence traces the search."""
    import types

    from keras_transformer.training import recipe

    now, seconds, decoded = [0.0], iter([9.0, 2.0, 3.0]), []

    def translate(sentences):
        decoded.append(len(sentences))
        now[0] += next(seconds)
        return types.SimpleNamespace(best=[s.upper() for s in sentences])

    timer = recipe.DecodeTimer(types.SimpleNamespace(translate=translate), clock=lambda: now[0])
    assert timer.seconds_per_sentence is None
    assert timer(["a", "b", "c", "d"]) == ["A", "B", "C", "D"] and timer.seconds_per_sentence == 0.5
    timer(["a", "b", "c", "d"])
    assert timer.seconds_per_sentence == 0.75 and decoded == [1, 4, 4]


def test_the_length_penalty_is_tried_as_the_translators_own_until_the_guard_says_no(tmp_path, tokenizer_path,
                                                                                   small_corpus, capsys):
    """`choose_length_penalty` decodes each further alpha with the run's one
    Translator set to it; the guard's first False leaves the rest untried and
    says so; the translator and the run's config end at the chosen alpha."""
    from keras_transformer.decoding import evaluation, restore
    from keras_transformer.run_dir import RunDir
    from keras_transformer.training import model_choice, recipe
    from tests.conftest import make_tiny_run_dir

    run_dir = RunDir(make_tiny_run_dir(tmp_path, tokenizer_path, small_corpus))
    config, model, tokenizer = restore.restore(run_dir.path)
    translator = restore.make_translator(config.decoding, model, tokenizer, alpha=model_choice.ALPHAS[0])
    _, test = small_corpus
    sentences, references = [s for s, _ in test[:6]], [t for _, t in test[:6]]
    first = evaluation.score(translator.translate(sentences, progress=False).best, references)
    first = {k: first[k] for k in ("bleu", "chrf", "exact_match")}
    choice = model_choice.ModelChoice("last", run_dir.checkpoints()[-1], {"last": first}, len(sentences))
    decoded_at, translate = [], translator.translate

    def translate_noting_alpha(texts, *args, **kwargs):
        decoded_at.append((translator.alpha, len(texts)))
        return translate(texts, *args, **kwargs)

    translator.translate = translate_noting_alpha
    answers = iter([True, False])
    config, chosen = recipe.choose_length_penalty(config, run_dir, recipe.DecodeTimer(translator), choice, sentences,
                                                  references, worth_trying=lambda: next(answers))
    assert decoded_at == [(0.8, 1), (0.8, 6)] and list(chosen.alpha_scores) == ["0.6", "0.8"]  # a trace, a decode
    assert chosen.alpha_scores["0.6"] == first
    assert chosen.alpha == model_choice.best_alpha({0.6: first, 0.8: chosen.alpha_scores["0.8"]})
    assert translator.alpha == config.alpha == run_dir.load_config().alpha == chosen.alpha
    assert "  alpha 1, 1.2 not tried: the time budget keeps the rest" in capsys.readouterr().out
