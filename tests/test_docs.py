"""The documentation, checked: README.md and every page of docs/.

Every `python scripts/NAME.py` command parses with its script's own parser, and each command and Python block
has one test that runs it, or the behaviour it shows: here where nothing else covers it, else the named test of
the module it exercises (`RUN_BY`). Commands run in a folder laid out like a user's checkout, whose `python` is
tests/helpers/docs_python.py: it mocks tfds datasets, splits the CPU for `--strategy mirrored`, and scales
paper-sized runs down. `docker run` is checked, not run (no Docker engine here).
"""

import argparse
import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import numpy as np
import pytest

from keras_transformer import cli
from keras_transformer.cli.reference import reference_main
from keras_transformer.cli.results import results_main
from keras_transformer.config import RunConfig
from keras_transformer.decoding import restore
from keras_transformer.export import saved_model
from tests.conftest import ROOT, write_tsv
from tests.helpers.docs import (DOC_PAGES, DOCS, FENCE, PAGES, README, bash, docs_block, docs_blocks, docs_command,
                                docs_commands, make_checkout, page_text, script_invocations)

# The page of records (built from results/ by scripts/make_results.py) is where commits and dates belong.
RESULTS_PAGE = os.path.join(DOCS, "results.md")
MAINS = {"train": cli.train_main, "translate": cli.translate_main, "evaluate": cli.evaluate_main,
         "export": cli.export_main, "average_checkpoints": cli.average_main,
         "plot_attention": cli.plot_attention_main, "benchmark": cli.benchmark_main, "score": cli.score_main,
         "mix_backtranslation": cli.mix_backtranslation_main, "plot_history": cli.plot_history_main,
         "make_glossary": cli.make_glossary_main, "make_reference": reference_main,
         "make_results": results_main}
MAIN_JOB = "tests/training/test_recipe.py::test_default_run_trains_scores_exports_and_shows_examples"
CLI, TERMS = "tests/cli/test_cli.py::test_", "tests/cli/test_terminology_flags.py::test_"
STRATEGIES, CORPUS = "tests/training/test_strategies.py::test_", "tests/data/test_local_corpus.py::test_"

# The test that runs each command (matched by regular expressions) of the pages, or its behaviour: a test of
# this module by name, else "path::name"; ".ci/run" runs the test command.
RUN_BY = {
    "test_virtual_environment_command": [r"^python3 -m venv \.venv && \. \.venv/bin/activate$"],
    "test_reference_command": [r"^python scripts/make_reference\.py > docs/reference\.md$"],
    "tests/cli/test_results.py::test_the_readme_and_the_results_page_are_what_the_records_make":
        [r"^python scripts/make_results\.py$"],
    ".ci/run": [r'^pip install -e "\.\[test\]" && python -m pytest$'],
    MAIN_JOB: [r"^pip install -e \. && python scripts/train\.py$", r"^python scripts/plot_attention\.py ",
               r"^echo .* \| python scripts/translate\.py --model (?!ct2_models/)",
               r"^python scripts/translate\.py --model saved_models/numerals_en_de "],
    "test_gpu_commands": [r"^python scripts/train\.py --dataset wmt14_translate/de-en .*--strategy mirrored .*--jit"],
    STRATEGIES + "wmt_recipe": [r"^python scripts/train\.py --dataset wmt14_translate/de-en (?!.*--jit-compile)",
                                r"^python scripts/average_checkpoints\.py ",
                                r"^python scripts/(evaluate|export)\.py --model-dir runs/wmt14-base "],
    STRATEGIES + "multi_worker_command": [r"^TF_CONFIG=.* python scripts/train\.py --strategy multi_worker "],
    "tests/export/test_ctranslate2_translator.py::test_ctranslate2_commands":
        [r"^python scripts/export\.py .*--format ctranslate2", r"^echo .* \| python scripts/translate\.py --model ct2"],
    "test_serving_commands": [r"^docker run .*numerals_en_de", r"^curl .*numerals_en_de"],
    "test_real_data_commands": [r"^docker run .*libreoffice", r"^curl .*libreoffice", r"^cut -f1 libreoffice",
                                r"^head -n -2000 ", r"^tail -n 2000 ", r"^awk .* > (short|medium)\.(train|test)\.tsv$"],
    "test_sample_command": [r"^python -c \"import random; .* > sample\.train\.tsv$"],
    "test_everyday_command": [r"^python -c \"import random; d = \{\}; .*everyday\.train\.tsv"],
    "test_ding_command": [r"^python -c \"import random, re; d = \{\}; .*ding\.train\.tsv"],
    "test_the_layout_section_names_every_module_and_folder": [r"^ls keras_transformer/$"],
    CLI + "inspect_data_prints_a_summary_and_bad_datasets_exit_with_a_message":
        [r"^python scripts/train\.py --dataset (corpus|libreoffice\.train)\.tsv --inspect-data$"],
    CLI + "translate_reads_stdin_or_a_file_from_a_model_dir_or_a_saved_model":
        [r"^python scripts/translate\.py --model saved_models/libreoffice\.train "],
    CLI + "translate_n_best_writes_ranked_tsv": [r"^python scripts/translate\.py --model runs/\S+ --n-best "],
    CLI + "translate_sampling_is_seeded_and_cold_sampling_is_greedy":
        [r"^python scripts/translate\.py --model runs/numerals_en_de-small --sampling-",
         r"^python scripts/translate\.py --model runs/de-en "],
    CLI + "ensembles_of_one_vocabulary_only": [r"^python scripts/translate\.py --model runs/numerals_en_de-small --mo"],
    CLI + "score_prints_beam_search_scores_of_its_own_translations": [r"^python scripts/score\.py "],
    CLI + "exported_n_best_signature_has_a_hypothesis_axis": [r"^python scripts/export\.py .*--n-best "],
    CLI + "export_script_writes_the_next_version":
        [r"^python scripts/export\.py --model-dir runs/numerals_en_de-small --beam-size "],
    (CLI + "benchmark_figures_are_consistent",  # the speed figures, then the streaming ones
     "tests/benchmarks/test_streaming.py::test_both_corpora_train_an_update_and_the_ratio_is_of_their_figures"):
        [r"^python scripts/benchmark\.py --corpus "],
    "tests/benchmarks/test_serving.py::test_every_engine_is_timed_on_the_same_sentences_and_the_ratios_follow":
        [r"^python scripts/benchmark\.py --serving "],
    "tests/benchmarks/test_onednn.py::test_the_flag_runs_only_this_comparison_with_the_shape_flags":
        [r"^python scripts/benchmark\.py --onednn "],
    "tests/benchmarks/test_constrained.py::test_constrained_figures_are_consistent":
        [r"^python scripts/benchmark\.py --constrained "],
    "tests/benchmarks/test_eole_peer.py::test_eole_peer_command": [r"^python scripts/benchmark\.py --peer-eole "],
    "tests/data/test_glossary.py::test_make_glossary_writes_what_translate_reads": [r"^python scripts/make_glossary"],
    TERMS + "constraints_glossary_and_prefixes_steer_the_translations":
        [r"^python scripts/translate\.py --model runs/libreoffice\.train-small "],
    TERMS + "evaluate_reports_the_term_use_rate_with_and_without_constraints":
        [r"^python scripts/evaluate\.py --model-dir runs/libreoffice\.train-small "],
    CORPUS + "two_line_aligned_files_stream_from_offsets": [r"^python scripts/train\.py --dataset corpus\.de,corpus"],
    CORPUS + "explicit_held_out_sets_replace_drawn_ones_and_their_copies_leave_training":
        [r"^python scripts/train\.py --dataset mixed\.en,mixed\.de "],
    "tests/data/test_backtranslation.py::test_the_held_out_pairs_are_the_real_corpus_drawn_ones":
        [r"^python scripts/mix_backtranslation\.py "],
    "tests/training/test_fine_tuning.py::test_a_fine_tuning_run_starts_from_the_runs_weights_and_vocabulary_with_"
    "a_fresh_optimizer": [r"^python scripts/train\.py --init-from "],
    "tests/training/test_recipe.py::test_a_time_budgeted_run_plans_records_stops_and_resumes":
        [r"^python scripts/train\.py --dataset libreoffice\.train\.tsv --test "],
    "tests/plots/test_history.py::test_the_table_and_the_picture_are_the_runs_scores": [r"^python scripts/plot_hist"],
}
COMMANDS_RUN_BY = {pattern: owner for owner, patterns in RUN_BY.items() for pattern in patterns}
# Commands no test runs, because they need what CI cannot have; each page showing one says so
# ("Not run by the tests: <reason>").
COMMANDS_NOT_RUN = {
    r'^pip install -e \. "tensorflow\[and-cuda\]==2\.21\.\*"$': "it installs CUDA, and CI has no GPU",
    r"^python -m venv eole-venv && eole-venv/bin/pip install torch==2\.13\.0 ": "it installs torch",
}
BLOCKS_RUN_BY = {
    "loading.load_translator(": "test_load_translator_block",
    "kt.Transformer.from_preset": "test_python_api_block",
    "decoding.greedy_search": "tests/training/test_fine_tuning.py::test_fine_tuning_block",
    'tfds.load("numerals_en_de"': "test_builtin_corpus_block",
    "PredictionServiceStub": "test_serving_commands",
    "tf.saved_model.load(": MAIN_JOB,
    "ctranslate2.Translator(": "tests/export/test_ctranslate2_translator.py::test_ctranslate2_commands",
    "decoding.sample_search(": "test_sample_search_block",
}
def owner_exists(owner):
    """A test of this module, or `path::name` naming a test function of that file, or a file (or a tuple
    of these)."""
    if isinstance(owner, tuple):
        return all(map(owner_exists, owner))
    path, _, name = owner.partition("::")
    if not name:
        return owner in globals() or os.path.exists(os.path.join(ROOT, owner))
    return re.search(rf"^def {name}\(", page_text(os.path.join(ROOT, path)), re.M) is not None


def test_every_docs_command_and_block_is_run():
    commands, blocks = docs_commands(), docs_blocks("python")
    for command in commands:
        owners = [p for p in [*COMMANDS_RUN_BY, *COMMANDS_NOT_RUN] if re.search(p, command)]
        assert len(owners) == 1, f"no single test runs this command: {command!r} ({owners})"
    for pattern, reason in COMMANDS_NOT_RUN.items():
        pages = [page for page in PAGES if any(re.search(pattern, line.strip())
                                               for line in page_text(page).splitlines())]
        assert pages and all(f"Not run by the tests: {reason}" in " ".join(page_text(page).split())
                                   for page in pages), pattern
    for pattern in [*COMMANDS_RUN_BY, *COMMANDS_NOT_RUN]:
        assert any(re.search(pattern, c) for c in commands), f"no command of the pages matches {pattern!r}"
    for block in blocks:
        owners = [m for m in BLOCKS_RUN_BY if m in block]
        assert len(owners) == 1, f"no single test runs this block:\n{block}"
    assert len(blocks) == len(BLOCKS_RUN_BY)
    for page in PAGES:  # code is bash or python; unlabelled blocks are listings, never run
        languages = {lang for lang, _ in FENCE.findall(page_text(page))}
        assert languages <= {"bash", "python", ""}, (page, languages)
    for owner in list(COMMANDS_RUN_BY.values()) + list(BLOCKS_RUN_BY.values()):
        assert owner_exists(owner), owner


def test_gpu_commands():
    """The GPU page's commands for the paper's base and big models on 8 GPUs parse with train.py's own flags
    into the paper's settings, and the per-GPU batch the page states is the global batch over 8 replicas."""
    from keras_transformer.cli.reference import parser_of

    parser, page = parser_of(cli.train_main), page_text(os.path.join(DOCS, "gpu.md"))
    made = {}
    for command in [c for c in docs_commands() if re.search(r"--strategy mirrored .*--jit-compile", c)]:
        args = vars(parser.parse_args(shlex.split(command)[2:]))
        config = RunConfig(**{k: v for k, v in args.items() if k not in ("inspect_data", "record")})
        made[config.preset] = config
        assert (config.strategy, config.batch_tokens, config.warmup_steps, config.cooldown) == ("mirrored", 25000,
                                                                                              4000, 0.0)
        assert config.jit_compile and config.precision == "mixed_bfloat16" and config.label_smoothing == 0.1
    assert (made["base"].steps, made["base"].average_last) == (100000, 5)  # the paper, section 6.1
    assert (made["big"].steps, made["big"].average_last) == (300000, 20)
    assert f"{25000 // 8:,} tokens a side per GPU on 8" in " ".join(page.split())


def test_reference_command(tmp_path):
    """docs/reference.md is what its command writes today: every flag of every
    script, none that no longer exists (a flag added, removed or reworded
    without running the command fails here)."""
    checkout = make_checkout(tmp_path)
    (checkout / "docs").mkdir()
    bash(checkout, docs_command(r"^python scripts/make_reference\.py "))
    written = (checkout / "docs" / "reference.md").read_text(encoding="utf-8")
    assert written == page_text(os.path.join(DOCS, "reference.md"))
    for name, main in MAINS.items():
        if name == "make_reference":
            continue
        assert f"\n## {name}.py\n" in written
        for flag in re.findall(r"^  (--[\w-]+)", capture_help(main), re.M):
            assert f"`{flag}" in written, (name, flag)


def capture_help(main):
    """What `main(["--help"])` prints."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["--help"])
    return out.getvalue()


def test_virtual_environment_command(tmp_path):
    """The README's first line makes a virtual environment in the clone and
    activates it: `python` and `pip` are then the environment's."""
    command = docs_command(r"^python3 -m venv ")
    result = subprocess.run(["bash", "-c", f"{command} && python -c 'import sys; print(sys.prefix)' && pip --version"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    prefix, pip = result.stdout.splitlines()
    assert prefix == str(tmp_path / ".venv") and f"{tmp_path / '.venv'}" in pip


def test_ci_runs_the_readmes_test_command_word_for_word(tmp_path):
    """.ci/run, beside a README whose test command is a harmless stand-in,
    runs that line and nothing else; without the marker it fails, saying so."""
    (tmp_path / ".ci").mkdir()
    shutil.copy(os.path.join(ROOT, ".ci", "run"), tmp_path / ".ci" / "run")
    readme = page_text(README)
    command = docs_command(r'^pip install -e "\.\[test\]" && python -m pytest$')
    assert readme.count(command) == 1
    stand_in = "echo the test command ran && pwd"
    (tmp_path / "README.md").write_text(readme.replace(command, stand_in), encoding="utf-8")
    result = subprocess.run(["bash", str(tmp_path / ".ci" / "run")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"+ {stand_in}", "the test command ran", str(tmp_path)]
    (tmp_path / "README.md").write_text(readme.replace("<!-- test-command -->", ""), encoding="utf-8")
    result = subprocess.run(["bash", str(tmp_path / ".ci" / "run")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "no test command found after <!-- test-command -->" in result.stderr


def github_anchor(heading):
    """The fragment GitHub gives a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_readme_is_short_and_every_page_is_history_free():
    """At most 250 lines; no commit hash and no dated measurement on any page."""
    assert len(page_text(README).splitlines()) <= 250
    for page in [p for p in PAGES if p != RESULTS_PAGE]:
        text = page_text(page)
        hashes = [w for w in re.findall(r"\b[0-9a-f]{7,40}\b", text) if re.search(r"\d", w) and re.search("[a-f]", w)]
        assert hashes == [], (page, hashes)
        assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), page


def test_every_task_page_starts_with_a_command_and_the_readme_links_it():
    readme = page_text(README)
    for name in DOC_PAGES:
        text = page_text(os.path.join(DOCS, name))
        assert re.match(r"# [^\n]+\n\n```bash\n", text), f"docs/{name} does not start with a command"
        assert f"](docs/{name}" in readme, f"the README does not link docs/{name}"
    assert sorted(name for name in os.listdir(DOCS) if name.endswith(".md")) == sorted(DOC_PAGES)


def test_every_relative_link_and_image_of_the_pages_resolves():
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", page_text(page)):
            if re.match(r"[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            assert os.path.exists(resolved), (page, target)
            if anchor:
                headings = re.findall(r"^#+ (.+)$", page_text(resolved), re.M)
                assert anchor in [github_anchor(h) for h in headings], (page, target)


class Parsed(Exception):
    pass


@pytest.mark.parametrize("name,args", script_invocations(), ids=lambda v: v if isinstance(v, str) else None)
def test_docs_command_parses(name, args, monkeypatch):
    """Each command's flags, through that script's real parser (fast; the
    tests below also run them)."""
    original = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, argv=None, namespace=None):
        raise Parsed(original(self, argv, namespace))

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    with pytest.raises(Parsed) as parsed:
        MAINS[name](args)
    values = vars(parsed.value.args[0])
    if name == "train":
        values.pop("inspect_data")
        values.pop("record")
        RunConfig(**values)  # raises on invalid values


@pytest.fixture(scope="module")
def trained_checkout(tmp_path_factory, tiny_run_dir):
    """A checkout after the main job, with a tiny model in its places:
    runs/numerals_en_de-small and saved_models/numerals_en_de/1."""
    checkout = make_checkout(tmp_path_factory.mktemp("user"))
    shutil.copytree(tiny_run_dir, checkout / "runs" / "numerals_en_de-small")
    config, model, tokenizer = restore.restore(tiny_run_dir)
    saved_model.export_translator(restore.make_translator(config.decoding, model, tokenizer),
                                  str(checkout / "saved_models" / "numerals_en_de"))
    return checkout


SENTENCES = ["It is half past seven.", "three hundred twenty-one", "Yesterday, my brother bought two apples."]


@pytest.mark.slow
def test_load_translator_block(trained_checkout, translator, monkeypatch, capsys):
    """The block, in a checkout after the main job: the run's translations and scores."""
    monkeypatch.chdir(trained_checkout)
    namespace = {}
    exec(docs_block("loading.load_translator("), namespace)  # noqa: S102
    sentences = ["It is half past seven.", "on the third of May"]
    expected = translator.translate(sentences, progress=False)
    result = namespace["result"]
    assert result.best == expected.best and result.scores.shape == (2, 1)
    np.testing.assert_allclose(result.scores, expected.scores, rtol=1e-5)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == str(expected.best)


@pytest.mark.slow
def test_serving_commands(trained_checkout, translator):
    from tests.helpers.serving_double import ServingDouble

    docker, curl = docs_command(r"^docker run .*numerals_en_de"), docs_command(r"^curl .*numerals_en_de")
    client = docs_block("PredictionServiceStub")
    # What `docker run` relies on: the mounted folder holds numbered versions,
    # and the model name and ports are the ones the clients use.
    host_path, name = re.search(r'-v "\$PWD/([^:]+):/models/([^"]+)"', docker).groups()
    assert re.search(rf"-e MODEL_NAME={name}\b", docker) and "-p 8500:8500" in docker and "-p 8501:8501" in docker
    versions = [v for v in os.listdir(trained_checkout / host_path) if v.isdigit()]
    assert versions and all((trained_checkout / host_path / v / "saved_model.pb").exists() for v in versions)
    assert f"http://localhost:8501/v1/models/{name}:predict" in curl
    assert f'request.model_spec.name = "{name}"' in client and '"localhost:8500"' in client

    sentence = json.loads(re.search(r"-d '(.*?)'", curl).group(1))["instances"][0]
    ((expected,),), ((score,),) = translator.translate([sentence], progress=False)
    with ServingDouble(name, str(trained_checkout / host_path)) as server:
        rest = bash(trained_checkout, curl.replace("localhost:8501", f"localhost:{server.rest_port}"))
        (prediction,) = json.loads(rest.stdout)["predictions"]
        assert prediction["translations"] == expected
        assert prediction["scores"] == pytest.approx(score, abs=1e-4)
        grpc_client = subprocess.run(
            [sys.executable, "-c", client.replace("localhost:8500", f"localhost:{server.grpc_port}")],
            capture_output=True, text=True, timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert grpc_client.returncode == 0, grpc_client.stderr[-3000:]
    assert ast.literal_eval(grpc_client.stdout.strip().splitlines()[-1]) == [expected]


def test_sample_search_block(tiny_run_dir, translator):
    """The translating page's block on a tiny model: ids and scores of the shapes it states."""
    import tensorflow as tf

    from keras_transformer import decoding
    from keras_transformer.decoding import scoring

    _, model, _ = restore.restore(tiny_run_dir)
    source_ids = translator.encode_sources(tf.constant(SENTENCES[:2]))
    target_ids = tf.constant([[5, 6, 0], [7, 0, 0]])
    namespace = {"model": model, "model_a": model, "model_b": model, "source_ids": source_ids,
                 "target_ids": target_ids}
    exec(docs_block("decoding.sample_search("), namespace)  # noqa: S102
    assert namespace["ids"].shape[:2] == (2, 4) and namespace["scores"]["log_prob"].shape == (2,)
    assert namespace["decoding"] is decoding and namespace["scoring"] is scoring


@pytest.mark.slow
def test_python_api_block():
    """The README's block, as it stands (it builds its own pairs): logits of
    the vocabulary's size, two updates, a finite validation loss."""
    namespace = {}
    exec(docs_block("kt.Transformer.from_preset"), namespace)  # noqa: S102
    logits, model = namespace["logits"], namespace["model"]
    assert logits.shape == (8, 10, 37000) and logits.dtype == "float32"
    assert int(model.optimizer.iterations) == 2  # 8 pairs in batches of 4
    assert np.isfinite(model.history.history["val_loss"][0])


def test_builtin_corpus_block(tmp_path):
    """The block builds the dataset (here into an empty TFDS_DATA_DIR) and
    loads exactly the generated test split."""
    from keras_transformer.data.numerals_en_de import generator as corpus

    dump = tmp_path / "test.json"
    code = docs_block('tfds.load("numerals_en_de"') + (
        f"\nimport json\njson.dump([[ex['en'].decode(), ex['de'].decode()] for ex in tfds.as_numpy(test)],"
        f" open({str(dump)!r}, 'w'))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=tmp_path,
                            env=dict(os.environ, TFDS_DATA_DIR=str(tmp_path / "tfds"), TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = [tuple(pair) for pair in json.load(open(dump))]
    assert len(loaded) == 1000 and sorted(loaded) == sorted(corpus.generate("test"))


def test_real_data_commands(tmp_path):
    """The README's own-corpus commands on a generated stand-in for the LibreOffice corpus (2,300 pairs at
    ../shared/data/): the split commands (and the training page's short and medium pairs), the file of
    test sentences, and TF Serving pointed at the export the translate command reads."""
    from keras_transformer.data.numerals_en_de import generator as corpus

    checkout = make_checkout(tmp_path)
    pairs = corpus.generate("train", 2300)
    os.makedirs(tmp_path / "shared" / "data")
    write_tsv(tmp_path / "shared" / "data" / "libreoffice_help_en_de.tsv", pairs)
    bash(checkout, docs_command(r"^head -n -2000 "))
    bash(checkout, docs_command(r"^tail -n 2000 "))
    assert (checkout / "libreoffice.test.tsv").read_text(encoding="utf-8") == "".join(
        f"{s}\t{t}\n" for s, t in pairs[300:])
    for split, part in (("train", pairs[:300]), ("test", pairs[300:])):
        for shape, words in (("short", 14), ("medium", 20)):
            bash(checkout, docs_command(rf"^awk .* > {shape}\.{split}\.tsv$"))
            kept = [(s, t) for s, t in part if len(s.split()) <= words]
            assert kept
            assert (checkout / f"{shape}.{split}.tsv").read_text(encoding="utf-8") == "".join(
                f"{s}\t{t}\n" for s, t in kept)
    bash(checkout, docs_command(r"^cut -f1 libreoffice\.test\.tsv "))
    assert (checkout / "help.txt").read_text(encoding="utf-8").splitlines() == [s for s, _ in pairs[300:320]]
    translate = docs_command(r"^python scripts/translate\.py --model saved_models/libreoffice\.train ")
    export = re.search(r"--model (\S+)", translate).group(1)
    assert re.search(r"--input help\.txt\b", translate)
    docker, curl = docs_command(r"^docker run .*libreoffice"), docs_command(r"^curl .*libreoffice")
    host_path, name = re.search(r'-v "\$PWD/([^:]+):/models/([^"]+)"', docker).groups()
    assert host_path == export and re.search(rf"-e MODEL_NAME={name}\b", docker) and "-p 8501:8501" in docker
    assert f"http://localhost:8501/v1/models/{name}:predict" in curl


def test_sample_command(tmp_path):
    """The training page's third corpus shape: 5,000 distinct lines of the
    training file, in the file's order, the same on every run."""
    checkout = make_checkout(tmp_path)
    lines = [f"source {i}\ttarget {i} ü\n" for i in range(6000)]
    (checkout / "libreoffice.train.tsv").write_text("".join(lines), encoding="utf-8")
    command = docs_command(r"^python -c \"import random; lines = ")
    bash(checkout, command)
    first = (checkout / "sample.train.tsv").read_text(encoding="utf-8")
    sample = first.splitlines(keepends=True)
    assert len(sample) == len(set(sample)) == 5000
    positions = [lines.index(line) for line in sample]
    assert positions == sorted(positions) and positions[-1] > 5000  # the file's order, drawn from all of it
    bash(checkout, command)
    assert (checkout / "sample.train.tsv").read_text(encoding="utf-8") == first


def test_everyday_command(tmp_path):
    """The training page's fifth corpus shape: of Tatoeba's pairs (deu.txt,
    whose newer releases add an attribution column), the sources of at least
    6 words, each with its first translation, drawn at random but the same on
    every run: 18,388 for training, 1,000 other ones for the test."""
    checkout = make_checkout(tmp_path)
    lines = []
    for i in range(30000):
        words = " ".join(["word"] * (3 + i % 6))  # 4-9 words with the number: a third are too short
        lines.append(f"{words} {i}.\tWort {i}.\tCC-BY 2.0 (France) Attribution: tatoeba.org #{i}\n")
        if i % 7 == 0:
            lines.append(f"{words} {i}.\tanders {i}.\tCC-BY 2.0 (France) Attribution: tatoeba.org #{i}\n")
    (checkout / "deu.txt").write_text("".join(lines), encoding="utf-8")
    command = docs_command(r"^python -c \"import random; d = ")
    bash(checkout, command)
    first = [(checkout / f"everyday.{split}.tsv").read_text(encoding="utf-8") for split in ("train", "test")]
    train, test = ([line.split("\t") for line in split.splitlines()] for split in first)
    assert (len(train), len(test)) == (18388, 1000)
    sources = [source for source, _ in train + test]
    assert len(set(sources)) == len(sources) and all(len(source.split()) >= 6 for source in sources)
    assert all(target == f"Wort {source.split()[-1][:-1]}." for source, target in train + test)
    numbers = [int(source.split()[-1][:-1]) for source in sources[:1000]]
    assert numbers != sorted(numbers) and max(numbers) > 25000  # drawn from all of the file, not its head
    bash(checkout, command)
    assert [(checkout / f"everyday.{split}.tsv").read_text(encoding="utf-8") for split in ("train", "test")] == first


def test_ding_command(tmp_path):
    """The training page's sixth corpus shape: of Ding's dictionary
    (`German :: English` lines, their senses apart by ` | `), the senses that
    are sentences on both sides, with no grammar or usage notes ({}, (), [])
    and no alternatives (;), and at least 3 English words, each English
    sentence once, with its first German; drawn at random but the same on
    every run: 1,000 for the test, the rest for training."""
    checkout = make_checkout(tmp_path)
    lines, kept = ["# Version :: 1.9 2022-01-01\n"], {}
    for i in range(1500):
        lines.append(f"Satz {{m}} | Das ist Satz {i}. :: sentence | This is sentence {i}.\n")
        kept[f"This is sentence {i}."] = f"Das ist Satz {i}."
        if i % 5 == 0:  # the same English again, later: the first German stays
            lines.append(f"Noch ein Satz {i}! :: This is sentence {i}.\n")
    lines += ["Das ist gut (umg.). :: That is good.\n", "Ist es gut? :: Is it good (coll.)?\n",
              "Das geht; Es geht. :: That works; it works.\n", "Er geht {v}. :: He goes away.\n",
              "Es regnet. :: It rains.\n", "Rede [übtr.] ist Silber. :: Speech is silver.\n",
              "ohne Ende :: without end\n", "Er kam, sah und siegte. :: He came, saw and conquered.\n"]
    kept["He came, saw and conquered."] = "Er kam, sah und siegte."
    folder = checkout / "trans-de-en" / "usr" / "share" / "trans"
    folder.mkdir(parents=True)
    (folder / "de-en").write_text("".join(lines), encoding="utf-8")
    command = docs_command(r"^python -c \"import random, re; d = ")
    bash(checkout, command)
    first = [(checkout / f"ding.{split}.tsv").read_text(encoding="utf-8") for split in ("train", "test")]
    train, test = ([tuple(line.split("\t")) for line in split.splitlines()] for split in first)
    assert (len(train), len(test)) == (len(kept) - 1000, 1000)
    assert sorted(train + test) == sorted(kept.items())
    numbers = [int(source.split()[-1][:-1]) for source, _ in test if source.startswith("This is")]
    assert numbers != sorted(numbers) and max(numbers) > 1400  # drawn from all of the file, not its head
    bash(checkout, command)
    assert [(checkout / f"ding.{split}.tsv").read_text(encoding="utf-8") for split in ("train", "test")] == first


def test_the_layout_section_names_every_module_and_folder(tmp_path):
    """The architecture page's `ls keras_transformer/` lists what its Layout
    section names: every folder, and every module but cli's family."""
    import pkgutil

    import keras_transformer

    checkout = make_checkout(tmp_path)
    (checkout / "keras_transformer").symlink_to(os.path.dirname(keras_transformer.__file__))
    listed = set(bash(checkout, docs_command(r"^ls keras_transformer/$")).stdout.split())
    page = page_text(os.path.join(DOCS, "architecture.md"))
    layout = page.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([a-z_0-9]+)/?`", layout))
    modules = {info.name.rsplit(".", 1)[1] for info in pkgutil.walk_packages(keras_transformer.__path__,
                                                                            "keras_transformer.")}
    # cli's modules are described as a family; the shim kept for old imports is not part of the layout.
    described = {m for m in modules if m not in {"builtin_dataset", "common", "train", "decode", "score",
                                                   "export", "data", "history", "benchmark"}}
    assert described - named == set()
    folders = {name for name in listed if "." not in name and name != "__pycache__"}
    assert folders == {"modeling", "data", "decoding", "export", "training", "benchmarks", "plots", "cli"}
    assert folders <= named
    shared = {name[:-3] for name in listed if name.endswith(".py") and name != "__init__.py"}
    assert shared == {"config", "run_dir", "files"} and shared <= named

