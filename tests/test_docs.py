"""The documentation, run: README.md and every page of docs/.

Every shell command in them runs word for word in bash, and every Python
block runs, in a folder laid out like a user's checkout: `scripts/`, and a
`python` on PATH that is tests/helpers/docs_python.py (it mocks tfds
datasets, splits the CPU for `--strategy mirrored`, and appends flags that
scale paper-sized runs down; see there). `docker run` is the one command
checked rather than run: there is no Docker engine here. The main job's line
is run by tests/training/test_recipe.py, and the test command by CI itself.
A command shown on two pages (the README's quick start and its task page)
is one command, run once.

`test_every_docs_command_and_block_is_run` fails when a page gains a
command or block that no test runs.
"""

import argparse
import ast
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys

import numpy as np
import pytest

from keras_transformer import cli
from benchmarks import eole_peer
from keras_transformer.cli.reference import reference_main
from keras_transformer.cli.results import results_main
from keras_transformer.config import RunConfig
from keras_transformer.decoding import restore
from keras_transformer.decoding.terminology import contains_term
from keras_transformer.export import saved_model
from keras_transformer.run_dir import RunDir
from tests.conftest import ROOT, load_config, weights_by_name, write_tsv

README = os.path.join(ROOT, "README.md")
DOCS = os.path.join(ROOT, "docs")
# The task pages of docs/, each starting with the command a user types.
DOC_PAGES = ["training.md", "translating.md", "serving.md", "benchmarks.md", "architecture.md", "gpu.md",
             "limits.md", "reference.md", "results.md"]
# The page of records (built from results/ by scripts/make_results.py) is where commits and dates belong.
RESULTS_PAGE = os.path.join(DOCS, "results.md")
PAGES = [README] + [os.path.join(DOCS, name) for name in DOC_PAGES]
DOCS_PYTHON = os.path.join(ROOT, "tests", "helpers", "docs_python.py")
MAINS = {"train": cli.train_main, "translate": cli.translate_main, "evaluate": cli.evaluate_main,
         "export": cli.export_main, "average_checkpoints": cli.average_main,
         "plot_attention": cli.plot_attention_main, "benchmark": cli.benchmark_main, "score": cli.score_main,
         "mix_backtranslation": cli.mix_backtranslation_main, "plot_history": cli.plot_history_main,
         "make_glossary": cli.make_glossary_main, "make_reference": reference_main,
         "make_results": results_main}

# What runs each command (matched by regular expression) and block of the pages.
COMMANDS_RUN_BY = {
    r"^python3 -m venv \.venv && \. \.venv/bin/activate$": "test_virtual_environment_command",
    r"^python scripts/make_reference\.py > docs/reference\.md$": "test_reference_command",
    r"^python scripts/make_results\.py$": "tests/cli/test_results.py",
    r"^pip install -e \. && python scripts/train\.py$": "tests/training/test_recipe.py",
    r'^pip install -e "\.\[test\]" && python -m pytest$': ".ci/run",
    r"^python scripts/train\.py --dataset corpus\.tsv --inspect-data$": "test_inspect_data_command",
    r"^python scripts/train\.py --dataset wmt14_translate/de-en (?!.*--jit-compile).*--strategy mirrored":
        "test_wmt_recipe",
    r"^python scripts/train\.py --dataset wmt14_translate/de-en .*--strategy mirrored .*--jit-compile":
        "test_gpu_commands",
    r"^python scripts/average_checkpoints\.py ": "test_wmt_recipe",
    r"^python scripts/evaluate\.py --model-dir runs/wmt14-base ": "test_wmt_recipe",
    r"^python scripts/make_glossary\.py ": "test_terminology_commands",
    r"^python scripts/translate\.py --model runs/libreoffice\.train-small ": "test_terminology_commands",
    r"^python scripts/evaluate\.py --model-dir runs/libreoffice\.train-small ": "test_terminology_commands",
    r"^python scripts/benchmark\.py --constrained ": "test_terminology_commands",
    r"^python scripts/export\.py --model-dir runs/wmt14-base ": "test_wmt_recipe",
    r"^python scripts/export\.py .*--format ctranslate2": "test_ctranslate2_commands",
    r"^echo .* \| python scripts/translate\.py --model ct2_models/": "test_ctranslate2_commands",
    r"^TF_CONFIG=.* python scripts/train\.py --strategy multi_worker ": "test_multi_worker_command",
    r"^echo .* \| python scripts/translate\.py --model (?!ct2_models/)": "test_translate_commands",
    r"^python scripts/translate\.py --model saved_models/numerals_en_de ": "test_translate_commands",
    r"^python scripts/translate\.py --model saved_models/libreoffice\.train ": "test_real_data_commands",
    r"^python scripts/translate\.py --model runs/numerals_en_de-small --n-best ": "test_data_work_commands",
    r"^python scripts/translate\.py --model runs/numerals_en_de-small --sampling-": "test_data_work_commands",
    r"^python scripts/translate\.py --model runs/numerals_en_de-small --model ": "test_data_work_commands",
    r"^python scripts/score\.py ": "test_data_work_commands",
    r"^python scripts/export\.py .*--n-best ": "test_data_work_commands",
    r"^python scripts/train\.py --dataset corpus\.de,corpus\.en ": "test_backtranslation_recipe",
    r"^python scripts/translate\.py --model runs/de-en ": "test_backtranslation_recipe",
    r"^python scripts/mix_backtranslation\.py ": "test_backtranslation_recipe",
    r"^python scripts/train\.py --dataset mixed\.en,mixed\.de ": "test_backtranslation_recipe",
    r"^docker run .*numerals_en_de": "test_serving_commands",
    r"^curl .*numerals_en_de": "test_serving_commands",
    r"^docker run .*libreoffice": "test_real_data_commands",
    r"^curl .*libreoffice": "test_real_data_commands",
    r"^cut -f1 libreoffice\.test\.tsv ": "test_real_data_commands",
    r"^python scripts/plot_attention\.py ": "test_plot_attention_command",
    r"^python scripts/benchmark\.py --corpus ": "test_benchmark_command",
    r"^python scripts/benchmark\.py --serving ": "test_serving_benchmark_command",
    r"^python scripts/benchmark\.py --onednn ": "test_onednn_benchmark_command",
    r"^python scripts/train\.py --init-from ": "test_fine_tuning_command",
    r"^head -n -2000 ": "test_real_data_commands",
    r"^tail -n 2000 ": "test_real_data_commands",
    r"^python scripts/train\.py --dataset libreoffice\.train\.tsv --test ": "test_real_data_commands",
    r"^python scripts/train\.py --dataset libreoffice\.train\.tsv --inspect-data$": "test_real_data_commands",
    r"^awk .* > (short|medium)\.(train|test)\.tsv$": "test_real_data_commands",
    r"^python -c \"import random; .* > sample\.train\.tsv$": "test_sample_command",
    r"^python -c \"import random; d = \{\}; .*everyday\.train\.tsv": "test_everyday_command",
    r"^python scripts/plot_history\.py ": "test_real_data_commands",
    r"^python scripts/export\.py --model-dir runs/numerals_en_de-small --beam-size ": "test_export_command",
    r"^ls keras_transformer/$": "test_the_layout_section_names_every_module_and_folder",
    r"^python scripts/benchmark\.py --peer-eole ": "test_eole_peer_command",
}
# Commands no test runs, because they need what CI cannot have; each page showing one says so
# ("Not run by the tests: <reason>").
COMMANDS_NOT_RUN = {
    r'^pip install -e \. "tensorflow\[and-cuda\]==2\.21\.\*"$': "it installs CUDA, and CI has no GPU",
    r"^python -m venv eole-venv && eole-venv/bin/pip install torch==2\.13\.0 ": "it installs torch",
}
BLOCKS_RUN_BY = {
    "loading.load_translator(": "test_load_translator_block",
    "kt.Transformer.from_preset": "test_python_api_block",
    "decoding.greedy_search": "test_fine_tuning_block",
    'tfds.load("numerals_en_de"': "test_builtin_corpus_block",
    "PredictionServiceStub": "test_serving_commands",
    "tf.saved_model.load(": "tests/training/test_recipe.py",
    "ctranslate2.Translator(": "test_ctranslate2_commands",
    "decoding.sample_search(": "test_data_work_commands",
}
# A fenced block: its language ("" when unlabelled) and its code.
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)
TINY_SCALE = ["--preset", "tiny", "--vocab-size", "300", "--batch-tokens", "1024", "--steps", "6",
              "--checkpoint-every", "1"]


def page_text(path):
    return open(path, encoding="utf-8").read()


def code_blocks(text, language):
    """The code blocks of one language in `text`, in order ("" for unlabelled ones)."""
    return [code for lang, code in FENCE.findall(text) if lang == language]


def docs_blocks(language):
    """The blocks of `language` over all pages, each once (a block shown on two pages is one)."""
    return list(dict.fromkeys(b for page in PAGES for b in code_blocks(page_text(page), language)))


def docs_commands():
    """The shell commands of all pages, one string each, with `\\` continuations
    joined; a command shown on two pages is listed once."""
    commands = []
    for block in docs_blocks("bash"):
        for line in re.sub(r"\\\n\s*", "", block).splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                commands.append(line.strip())
    return list(dict.fromkeys(commands))


def docs_command(pattern):
    matches = [c for c in docs_commands() if re.search(pattern, c)]
    assert len(matches) == 1, (pattern, matches)
    return matches[0]


def docs_block(marker):
    matches = [b for b in docs_blocks("python") if marker in b]
    assert len(matches) == 1, (marker, matches)
    return matches[0]


def docs_table(header):
    """The rows of the table (on any page) whose header row is `header`, as lists of cells."""
    text = "\n".join(page_text(page) for page in PAGES)
    rows = re.search(rf"^{re.escape(header)}\n\|[-|]+\|\n((?:\|.*\|\n)+)", text, re.M).group(1)
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows.splitlines()]


def script_invocations():
    """(script name, argv) for each `python scripts/NAME.py ...` in the commands."""
    found = []
    for command in docs_commands():
        for part in command.split("|"):
            match = re.search(r"python scripts/(\w+)\.py(.*)", part)
            if match:
                found.append((match.group(1), shlex.split(match.group(2).split(">")[0].split("&&")[0])))
    return found


def make_checkout(root):
    """A folder like a user's checkout: scripts/, benchmarks/ and, on PATH, the documentation's `python`."""
    checkout = root / "checkout"
    (checkout / "bin").mkdir(parents=True)
    (checkout / "scripts").symlink_to(os.path.join(ROOT, "scripts"))
    (checkout / "benchmarks").symlink_to(os.path.join(ROOT, "benchmarks"))  # the lab scripts/benchmark.py runs
    shim = checkout / "bin" / "python"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{DOCS_PYTHON}" "$@"\n')
    shim.chmod(0o755)
    return checkout


def bash(checkout, command, timeout=900, **env):
    """Runs one documented command in the checkout; the result, after checking it succeeded."""
    environment = dict(os.environ, PATH=f"{checkout / 'bin'}{os.pathsep}{os.environ['PATH']}",
                       TF_CPP_MIN_LOG_LEVEL="2", **env)
    environment.pop("TF_CONFIG", None)
    result = subprocess.run(["bash", "-c", command], cwd=checkout, capture_output=True, text=True,
                            timeout=timeout, env=environment)
    assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
        assert owner in globals() or os.path.exists(os.path.join(ROOT, owner)), owner


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


def test_translate_commands(trained_checkout, translator):
    from_stdin = docs_command(r"^echo .* \| python scripts/translate\.py --model (?!ct2_models/)")
    sentence = re.match(r'^echo "(.*)" \|', from_stdin).group(1)
    expected = translator.translate([sentence] + SENTENCES, progress=False).best
    assert bash(trained_checkout, from_stdin).stdout == expected[0] + "\n"

    from_file = docs_command(r"^python scripts/translate\.py --model saved_models/numerals_en_de ")
    (trained_checkout / "sentences.txt").write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    bash(trained_checkout, from_file)
    assert (trained_checkout / "translations.txt").read_text(encoding="utf-8") == "\n".join(expected[1:]) + "\n"


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


def test_plot_attention_command(trained_checkout):
    command = docs_command(r"^python scripts/plot_attention\.py ")
    printed = bash(trained_checkout, command).stdout.split()
    assert printed == ["attention/layer_0.png", "attention/layer_1.png"]  # the tiny preset: 2 decoder layers
    for path in printed:
        assert (trained_checkout / path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_inspect_data_command(tmp_path, small_corpus):
    checkout = make_checkout(tmp_path)
    train, _ = small_corpus
    write_tsv(checkout / "corpus.tsv", train[:400])
    out = bash(checkout, docs_command(r"--dataset corpus\.tsv --inspect-data$"),
               KT_TEST_SCALE=json.dumps({"train.py": ["--vocab-size", "400"]})).stdout
    assert re.search(r"^pairs read: +380$", out, re.M)  # 20 of 400 held out for validation and test
    assert re.search(r"^padding efficiency: ", out, re.M)
    # It keeps the vocabulary it trained for the run, but records no run: any training command may follow.
    assert (checkout / "runs" / "corpus-small" / "sentencepiece.model").exists()
    assert not (checkout / "runs" / "corpus-small" / "run_config.json").exists()


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


def test_data_work_commands(trained_checkout, tiny_run_dir, translator):
    """n-best, sampling, an ensemble, scoring and the n-best export, as the
    translating page runs them on the main job's run (here a tiny one, copied as the
    second ensemble member), and the Python block on that model."""
    import tensorflow as tf

    from keras_transformer import decoding
    from keras_transformer.decoding import scoring

    checkout = trained_checkout
    (checkout / "sentences.txt").write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    second = checkout / "runs" / "numerals_en_de-small-seed2"
    if not second.exists():
        shutil.copytree(checkout / "runs" / "numerals_en_de-small", second)

    bash(checkout, docs_command(r"--model runs/numerals_en_de-small --n-best "))
    rows = [line.split("\t") for line in (checkout / "nbest.tsv").read_text(encoding="utf-8").split("\n")[:-1]]
    n = int(re.search(r"--n-best (\d+)", docs_command(r"--n-best \d+ --input")).group(1))
    assert [(int(r[0]), int(r[1])) for r in rows] == [(i, k) for i in range(len(SENTENCES)) for k in range(n)]
    best = translator.translate(SENTENCES, progress=False).best
    assert [r[3] for r in rows if r[1] == "0"] == best

    sampling = docs_command(r"--model runs/numerals_en_de-small --sampling-")
    first, again = bash(checkout, sampling).stdout, bash(checkout, sampling).stdout
    assert first == again and len(first.split("\n")) == len(SENTENCES) + 1

    ensemble = bash(checkout, docs_command(r"--model runs/numerals_en_de-small --model ")).stdout
    assert ensemble == "\n".join(best) + "\n"  # two copies of one model: the model

    pairs = [(s, t) for s, t in zip(SENTENCES, best)]
    (checkout / "pairs.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    bash(checkout, docs_command(r"^python scripts/score\.py "))
    scored = (checkout / "scores.tsv").read_text(encoding="utf-8").split("\n")
    assert scored[0] == "index\tlog_prob\tper_token\tnormalized\tpieces" and len(scored) == len(pairs) + 2

    exported = bash(checkout, docs_command(r"^python scripts/export\.py .*--n-best ")).stdout.strip()
    assert exported == "saved_models/numerals_en_de_nbest/1"
    served = tf.saved_model.load(str(checkout / exported)).signatures["serving_default"]
    assert served(sentences=tf.constant(SENTENCES))["translations"].shape == (len(SENTENCES), n)

    _, model, _ = restore.restore(tiny_run_dir)
    source_ids = translator.encode_sources(tf.constant(SENTENCES[:2]))
    target_ids = tf.constant([[5, 6, 0], [7, 0, 0]])
    namespace = {"model": model, "model_a": model, "model_b": model, "source_ids": source_ids,
                 "target_ids": target_ids}
    exec(docs_block("decoding.sample_search("), namespace)  # noqa: S102
    assert namespace["ids"].shape[:2] == (2, 4) and namespace["scores"]["log_prob"].shape == (2,)
    assert namespace["decoding"] is decoding and namespace["scoring"] is scoring


@pytest.mark.slow
def test_backtranslation_recipe(tmp_path, small_corpus):
    """The four back-translation commands, in order, on generated data and the tiny
    preset: reverse model, sampled back-translations (repeatable by seed),
    the tagged mix with real pairs last, and the forward run on the mix."""
    checkout = make_checkout(tmp_path)
    train, _ = small_corpus
    real, monolingual = train[:600], train[600:700]
    for path, lines in (("corpus.en", [s for s, _ in real]), ("corpus.de", [t for _, t in real]),
                        ("mono.de", [t for _, t in monolingual])):
        (checkout / path).write_text("\n".join(lines) + "\n", encoding="utf-8")
    scale = {"train.py": TINY_SCALE[:-4] + ["--vocab-size", "500", "--steps", "20", "--checkpoint-every", "20",
                                          "--export-dir", ""]}
    env = {"KT_TEST_SCALE": json.dumps(scale)}
    reverse, sample, mix, forward = (docs_command(p) for p in (
        r"^python scripts/train\.py --dataset corpus\.de,corpus\.en ", r"^python scripts/translate\.py --model runs/de-en ",
        r"^python scripts/mix_backtranslation\.py ", r"^python scripts/train\.py --dataset mixed\.en,mixed\.de "))

    bash(checkout, reverse, **env)
    assert json.load(open(checkout / "runs" / "de-en" / "run_config.json"))["dataset"] == "corpus.de,corpus.en"
    bash(checkout, sample, **env)
    sampled = (checkout / "mono.sampled.en").read_text(encoding="utf-8")
    bash(checkout, sample.replace("mono.sampled.en", "again.en"), **env)
    assert (checkout / "again.en").read_text(encoding="utf-8") == sampled  # the seed fixes the sample
    assert len(sampled.split("\n")) == len(monolingual) + 1

    printed = bash(checkout, mix, **env).stdout
    mixed_en = (checkout / "mixed.en").read_text(encoding="utf-8").split("\n")[:-1]
    mixed_de = (checkout / "mixed.de").read_text(encoding="utf-8").split("\n")[:-1]
    synthetic = [line for line in sampled.split("\n")[:-1]]
    kept = [(s, t) for s, t in zip(synthetic, [t for _, t in monolingual]) if s.strip()]
    assert mixed_en == [f"<BT> {s}" for s, _ in kept] + [s for s, _ in real]
    assert mixed_de == [t for _, t in kept] + [t for _, t in real]
    assert f"{len(kept)} synthetic (tagged <BT>), then {len(real)} real" in printed
    # The held-out sets are the real corpus' drawn ones: the reverse run's, swapped.
    from keras_transformer.data.local_corpus import LocalCorpus

    reverse_run = LocalCorpus(f"{checkout}/corpus.de,{checkout}/corpus.en")
    for split in ("validation", "test"):
        written = (checkout / f"real.{split}.tsv").read_text(encoding="utf-8").splitlines()
        assert [tuple(line.split("\t")) for line in written] == [(s, t) for t, s in reverse_run.split(split)]
        assert len(written) == 15 and not any(line.startswith("<BT>") for line in written)

    trained = bash(checkout, forward, **env).stdout
    assert re.search(r"^sacreBLEU \d+\.\d+", trained, re.M)
    assert json.load(open(checkout / "runs" / "en-de-bt" / "run_config.json"))["dataset"] == "mixed.en,mixed.de"
    assert "Test set: 15 sentences" in trained
    assert "removed as copies of validation/test pairs: 30" in trained  # the real copies inside the mix


def test_ctranslate2_commands(tmp_path, trained_tiny_run):
    """The CTranslate2 section on a trained tiny run in the main job's place:
    the export command writes the directory the translate command and the
    Python block use, and both print the same translation, which is the one
    CTranslate2 gives with the run's own decoding settings."""
    from keras_transformer.export.ctranslate2_translator import CTranslate2Translator

    checkout = make_checkout(tmp_path)
    shutil.copytree(trained_tiny_run, checkout / "runs" / "numerals_en_de-small")
    export = docs_command(r"^python scripts/export\.py .*--format ctranslate2")
    output = re.search(r"--output (\S+)", export).group(1)
    assert bash(checkout, export).stdout.strip() == output
    command = docs_command(r"^echo .* \| python scripts/translate\.py --model ct2_models/")
    assert f"--model {output}" in command
    printed = bash(checkout, command).stdout
    sentence = re.match(r'^echo "(.*)" \|', command).group(1)
    (expected,), _ = CTranslate2Translator(str(checkout / output)).translate_batch([sentence])
    assert printed == expected + "\n" and expected

    # The block ranks with CTranslate2's own length penalty (length ** alpha), not the run's, so its translation
    # is CTranslate2's at the block's settings, which can differ from the one above on another CPU's int8 kernels.
    import ctranslate2
    import sentencepiece

    block = docs_block("ctranslate2.Translator(")
    assert f'"{output}"' in block and f'"{output}/sentencepiece.model"' in block and sentence in block
    compute_type = re.search(r'compute_type="(\w+)"', block).group(1)
    options = {name: float(value) if "." in value else int(value) for name, value in
               re.findall(r"(beam_size|length_penalty|min_decoding_length)=([\d.]+)", block)}
    assert set(options) == {"beam_size", "length_penalty", "min_decoding_length"}
    pieces = sentencepiece.SentencePieceProcessor(model_file=str(checkout / output / "sentencepiece.model"))
    (own,) = ctranslate2.Translator(str(checkout / output), compute_type=compute_type).translate_batch(
        pieces.encode([sentence], out_type=str), **options)
    own_translation = pieces.decode(own.hypotheses[0])
    result = subprocess.run([sys.executable, "-c", block], cwd=checkout, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert ast.literal_eval(result.stdout.strip().splitlines()[-1]) == [own_translation] and own_translation


@pytest.mark.slow
def test_onednn_benchmark_command(tmp_path):
    """The documented comparison at a tiny scale: both settings timed, and the ratios of the figures printed."""
    checkout = make_checkout(tmp_path)
    scale = ["--preset", "tiny", "--vocab-size", "300", "--batch-tokens", "256", "--length", "8",
             "--train-steps", "2", "--decode-batch", "2", "--output-length", "5"]
    out = bash(checkout, docs_command(r"^python scripts/benchmark\.py --onednn "),
               KT_TEST_SCALE=json.dumps({"benchmark.py": scale})).stdout
    (line,) = [line for line in out.splitlines() if line.startswith("9. ")]
    match = re.fullmatch(r"9\. oneDNN, tiny float32, best of 2 fresh processes each: fit (\d+) target tokens/s off, "
                         r"(\d+) on: (\d+\.\d{3})x; beam search (\d+\.\d\d) sentences/s off, (\d+\.\d\d) on: "
                         r"(\d+\.\d{3})x", line)
    assert match, line
    train_off, train_on, train_ratio, decode_off, decode_on, decode_ratio = map(float, match.groups())
    assert train_ratio == pytest.approx(train_on / train_off, rel=0.01)
    assert decode_ratio == pytest.approx(decode_on / decode_off, rel=0.01)


@pytest.mark.slow
def test_benchmark_command(tmp_path, small_corpus):
    checkout = make_checkout(tmp_path)
    command = docs_command(r"^python scripts/benchmark\.py --corpus ")
    corpus_path = re.search(r"--corpus (\S+)", command).group(1)
    train, _ = small_corpus
    os.makedirs(os.path.dirname(checkout / corpus_path))
    write_tsv(checkout / corpus_path, train[:400])  # the documented corpus path, with a small stand-in
    scale = ["--preset", "tiny", "--vocab-size", "300", "--batch-tokens", "256", "--length", "16",
             "--train-steps", "1", "--decode-batch", "2", "--output-length", "6", "--engines-batch", "4",
             "--streaming-pairs", "3000"]
    out = bash(checkout, command, KT_TEST_SCALE=json.dumps({"benchmark.py": scale})).stdout
    streaming = re.findall(r"^7\. +([\d,]+) pairs: first update after +([\d.]+) s, peak RSS ([\d.]+) GB$", out, re.M)
    assert [int(n.replace(",", "")) for n, _, _ in streaming] == [300, 3000]
    (_, _, small_rss), (_, _, large_rss) = streaming
    ratio = float(re.search(r"^7\. 10x the pairs: (\d+\.\d\d)x the peak RSS", out, re.M).group(1))
    small_rss, large_rss = float(small_rss), float(large_rss)
    # The ratio is printed from the unrounded figures, the figures to 0.01 GB: the printed ratio may differ
    # from the ratio of the printed figures by its own rounding (0.005) plus what the figures' rounding moves.
    rounding = 0.005 + 0.005 * (large_rss / small_rss) * (1 / small_rss + 1 / large_rss) + 1e-9
    assert 0.3 < small_rss < 8 and ratio == pytest.approx(large_rss / small_rss, abs=rounding)
    lines = [line for line in out.splitlines() if re.match(r"^[1-6]\. ", line)]
    assert [line[:2] for line in lines] == ["1.", "2.", "2.", "2.", "3.", "4.", "5."] + ["6."] * 5
    bucketed, naive = map(float, re.search(r"bucketed (\d\.\d+), naive (\d\.\d+)", lines[6]).groups())
    assert 0 < naive < bucketed <= 1
    engines = {name: float(value) for name, value in
               (re.match(r"6\. beam search (\S+) +(\d+) output tokens/s", line).groups() for line in lines[7:11])}
    assert list(engines) == ["ours_float32", "ours_mixed_bfloat16", "ctranslate2_float32", "ctranslate2_int8"]
    ratios = re.search(r"float32 (\d+\.\d\d)x \(goal >= 1\.0\), / CTranslate2 int8 (\d+\.\d\d)x", lines[11])
    best = max(engines["ours_float32"], engines["ours_mixed_bfloat16"])
    assert float(ratios.group(1)) == pytest.approx(best / engines["ctranslate2_float32"], rel=0.02, abs=0.01)
    assert float(ratios.group(2)) == pytest.approx(best / engines["ctranslate2_int8"], rel=0.02, abs=0.01)


@pytest.mark.slow
def test_wmt_recipe(tmp_path):
    """The paper's recipe as the training page gives it, on 64 mock WMT14 pairs per
    split, two CPU replicas and a tiny model: train with MirroredStrategy,
    average the last 5 checkpoints, evaluate and export with the average."""
    import tensorflow as tf
    import tensorflow_datasets as tfds

    from keras_transformer.data import sources

    checkout = make_checkout(tmp_path)
    env = {"KT_TEST_MOCK_TFDS": "64", "KT_TEST_LOGICAL_CPUS": "2",
           "KT_TEST_SCALE": json.dumps({"train.py": TINY_SCALE})}
    trained = bash(checkout, docs_command(r"--dataset wmt14_translate/de-en (?!.*--jit-compile).*--strategy mirrored"),
                   **env)
    assert "Strategy: mirrored, 2 replica(s) in sync" in trained.stdout
    run = checkout / "runs" / "wmt14-base"
    kept = RunDir(run).checkpoints()
    assert [os.path.basename(p) for p in kept] == [f"ckpt-0000{i}.weights.h5" for i in range(2, 7)]
    paper = load_config(str(run))  # the paper's schedule: warm-up 4000, inverse square root to the end
    assert (paper.warmup_steps, paper.cooldown, paper.learning_rate_scale, paper.label_smoothing) == (4000, 0.0, 1.0, 0.1)

    bash(checkout, docs_command(r"^python scripts/average_checkpoints\.py "), **env)
    averaged = weights_by_name(run / "averaged.weights.h5")
    last_five = [weights_by_name(p) for p in kept]
    assert len(averaged) > 10
    for name, value in averaged.items():
        np.testing.assert_allclose(value, np.mean([w[name] for w in last_five], axis=0), rtol=1e-5, atol=1e-6,
                                   err_msg=name)

    evaluated = bash(checkout, docs_command(r"^python scripts/evaluate\.py --model-dir runs/wmt14-base "), **env)
    assert re.search(r"^sacreBLEU \d+\.\d+  \(nrefs:1\|", evaluated.stdout, re.M)
    exported = bash(checkout, docs_command(r"^python scripts/export\.py --model-dir runs/wmt14-base "), **env)
    assert sorted(os.listdir(checkout / "saved_models" / "wmt14-base")) == ["1", "2"]  # train.py exported 1
    assert "saved_models/wmt14-base/2" in exported.stdout

    # Both used the averaged weights: the same translations as a model restored with them here.
    config, model, tokenizer = restore.restore(str(run), str(run / "averaged.weights.h5"))
    translator = restore.make_translator(config.decoding, model, tokenizer)
    with tfds.testing.mock_data(num_examples=64):
        sentences, _ = sources.read_split(config.data, "test")
    expected = translator.translate(sentences, progress=False).best
    hypotheses = (run / "test.hypotheses.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert hypotheses == expected
    served = tf.saved_model.load(str(checkout / "saved_models" / "wmt14-base" / "2"))
    out = served.signatures["serving_default"](sentences=tf.constant(sentences[:8]))
    assert [t.decode("utf-8") for t in out["translations"].numpy()] == expected[:8]


@pytest.mark.slow
def test_multi_worker_command(tmp_path):
    """The training page's TF_CONFIG command, started twice (worker 0 and worker 1) on
    127.0.0.1 with /shared/ moved into tmp_path: both finish with identical
    weights, and only the chief evaluates."""
    from tests.training.test_trainer import optimizer_iterations

    checkout = make_checkout(tmp_path)
    command = docs_command(r"^TF_CONFIG=")
    hosts = re.findall(r'"(host\d:\d+)"', command)
    assert len(hosts) == 2 and '"index": 0' in command
    ports = [free_port(), free_port()]
    for host, port in zip(hosts, ports):
        command = command.replace(host, f"127.0.0.1:{port}")
    command = command.replace("/shared/", f"{tmp_path}/shared/")
    environment = dict(os.environ, PATH=f"{checkout / 'bin'}{os.pathsep}{os.environ['PATH']}",
                       TF_CPP_MIN_LOG_LEVEL="2", KT_TEST_MOCK_TFDS="64",
                       KT_TEST_SCALE=json.dumps({"train.py": TINY_SCALE[:-4] + ["--steps", "6", "--checkpoint-every", "3"]}))
    environment.pop("TF_CONFIG", None)
    workers = [subprocess.Popen(["bash", "-c", command.replace('"index": 0', f'"index": {index}')], cwd=checkout,
                                env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for index in range(2)]
    outputs = [w.communicate(timeout=900)[0] for w in workers]
    assert [w.returncode for w in workers] == [0, 0], outputs[0][-2000:] + outputs[1][-2000:]
    model_dir = re.search(r"--model-dir (\S+)", command).group(1)
    chief = os.path.join(model_dir, "checkpoints", "ckpt-00002.weights.h5")
    other = os.path.join(model_dir, "workers", "1", "checkpoints", "ckpt-00002.weights.h5")
    assert optimizer_iterations(chief) == optimizer_iterations(other) == 6
    a, b = weights_by_name(chief), weights_by_name(other)
    assert len(a) > 10 and a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    assert "Strategy: multi_worker, 2 replica(s) in sync" in outputs[0]
    assert "sacreBLEU" in outputs[0] and "sacreBLEU" not in outputs[1]


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


def test_fine_tuning_block(trained_checkout, monkeypatch, capsys):
    """The training page's block, in a checkout after the main job: the run
    restored, 40 updates on the block's own pairs lower their loss below the
    run's, its batches are shifted by one, the translator prints what the
    block's beam search finds, and the weights it saves reload to the same model."""
    import tensorflow as tf

    import keras_transformer as kt
    from keras_transformer.data.tokenizer import BOS_ID, EOS_ID
    from keras_transformer.decoding import restore

    monkeypatch.chdir(trained_checkout)
    namespace = {}
    exec(docs_block("decoding.greedy_search"), namespace)  # noqa: S102
    model, tokenizer = namespace["model"], namespace["tokenizer"]
    assert int(model.optimizer.iterations) == 40
    (source, target_in), target_out = next(iter(namespace["batches"]))
    assert source.dtype == target_in.dtype == target_out.dtype == tf.int32
    # The decoder input is BOS + target and the output target + EOS: shifted by one.
    assert np.all(np.asarray(target_in[:, 0]) == BOS_ID)
    shifted = np.asarray(target_out[:, :-1])
    np.testing.assert_array_equal(np.where(shifted == EOS_ID, 0, shifted), target_in[:, 1:])

    loss = kt.LabelSmoothedCrossEntropy(label_smoothing=0.1)
    _, before, _ = restore.restore(str(trained_checkout / "runs" / "numerals_en_de-small"))
    tuned_loss = float(loss(target_out, model((source, target_in), training=False)))
    run_loss = float(loss(target_out, before((source, target_in), training=False)))
    assert tuned_loss < 0.8 * run_loss, (tuned_loss, run_loss)

    ids, scores = namespace["ids"], namespace["scores"]  # the beam search's (it reassigns `ids`)
    source_length = namespace["source_ids"].shape[1]
    assert ids.shape[:2] == (1, 1) and ids.shape[2] <= source_length + 50 and ids.dtype == tf.int32
    assert scores.shape == (1, 1) and np.all(np.asarray(scores) <= 0)
    beam_text = tokenizer.detokenize(ids[:, 0]).numpy()[0].decode("utf-8")
    assert capsys.readouterr().out.splitlines()[-1] == str([beam_text])  # the run's decoding: beam 4, alpha 0.6

    _, reloaded, _ = restore.restore(str(trained_checkout / "runs" / "numerals_en_de-small"),
                                     weights=str(trained_checkout / "fine_tuned.weights.h5"))
    np.testing.assert_allclose(reloaded((source, target_in), training=False),
                               model((source, target_in), training=False), rtol=1e-5, atol=1e-5)


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


def test_fine_tuning_command(tmp_path, trained_tiny_run):
    """The training page's --init-from command, from a trained tiny run standing in for
    runs/wmt14-base, on a small my_domain.tsv: the new run has the old one's
    preset and vocabulary, validation scores, and a model choice."""
    checkout = make_checkout(tmp_path)
    shutil.copytree(trained_tiny_run, checkout / "runs" / "wmt14-base")
    from keras_transformer.data.numerals_en_de import generator as corpus

    write_tsv(checkout / "my_domain.tsv", corpus.generate("test", 400))
    scale = ["--batch-tokens", "1024", "--steps", "4", "--checkpoint-every", "2", "--max-output-extra", "5"]
    out = bash(checkout, docs_command(r"^python scripts/train\.py --init-from "),
               KT_TEST_SCALE=json.dumps({"train.py": scale})).stdout
    tuned = checkout / "runs" / "wmt14-base-my_domain"
    config = load_config(tuned)
    assert (config.preset, config.vocab_size) == ("tiny", 500)
    assert (tuned / "sentencepiece.model").read_bytes() == (checkout / "runs" / "wmt14-base" /
                                                          "sentencepiece.model").read_bytes()
    assert sorted(json.loads((tuned / "checkpoints" / "validation.json").read_text())["scores"]) == ["0", "1"]
    chosen = json.loads((tuned / "model_choice.json").read_text())["chosen"]
    assert re.search(rf"^Test set: \d+ sentences, {chosen} model$", out, re.M)


def test_real_data_commands(tmp_path, small_corpus):
    """The README's own-corpus commands and the training page's plot, on a
    generated stand-in for the LibreOffice corpus (2,300 pairs at
    ../shared/data/), a tiny model and a 1.5-minute budget: the split
    commands (and the short pairs'), training with --test and
    --time-budget, and the plot."""
    from keras_transformer.data.numerals_en_de import generator as corpus

    checkout = make_checkout(tmp_path)
    pairs = corpus.generate("train", 2300)
    os.makedirs(tmp_path / "shared" / "data")
    write_tsv(tmp_path / "shared" / "data" / "libreoffice_help_en_de.tsv", pairs)
    bash(checkout, docs_command(r"^head -n -2000 "))
    bash(checkout, docs_command(r"^tail -n 2000 "))
    assert (checkout / "libreoffice.test.tsv").read_text(encoding="utf-8") == "".join(
        f"{s}\t{t}\n" for s, t in pairs[300:])
    for split, part in (("train", pairs[:300]), ("test", pairs[300:])):  # the training page's short and medium pairs
        for shape, words in (("short", 14), ("medium", 20)):
            bash(checkout, docs_command(rf"^awk .* > {shape}\.{split}\.tsv$"))
            kept = [(s, t) for s, t in part if len(s.split()) <= words]
            assert kept
            assert (checkout / f"{shape}.{split}.tsv").read_text(encoding="utf-8") == "".join(
                f"{s}\t{t}\n" for s, t in kept)
    # The README's inspection first: it keeps the vocabulary for the run and records none, so the
    # budgeted command that follows starts in the same folder.
    inspected = bash(checkout, docs_command(r"^python scripts/train\.py --dataset libreoffice\.train\.tsv --insp"),
                     KT_TEST_SCALE=json.dumps({"train.py": ["--vocab-size", "500"]})).stdout
    assert re.search(r"^pairs read: +2\d\d$", inspected, re.M)  # 300 lines, less the pairs it holds out
    command = docs_command(r"^python scripts/train\.py --dataset libreoffice\.train\.tsv --test ")
    assert command.endswith(" --time-budget 25")
    model_dir = re.search(r"--model-dir (\S+)", docs_command(r"^python scripts/plot_history\.py ")).group(1)
    assert (checkout / model_dir / "sentencepiece.model").exists()  # the default folder: the run's
    assert not (checkout / model_dir / "run_config.json").exists()
    # The clock places a budget's checkpoints: no --steps or --checkpoint-every.
    scale = ["--preset", "tiny", "--batch-tokens", "1024", "--vocab-size", "500", "--bleu-sentences", "5",
             "--max-output-extra", "5", "--time-budget", "1.5", "--model-dir", model_dir]
    # The probe says 0.4 s an update, as on a CPU: a short run, whatever machine runs this test.
    out = bash(checkout, command, KT_TEST_SCALE=json.dumps({"train.py": scale}), KT_TEST_PROBE_SECONDS="0.4").stdout
    assert "recipe:\n" in out and "Time budget: 1.5 minutes; the command took " in out
    assert re.search(rf"^Run folder: {re.escape(model_dir)}$", out, re.M)
    assert re.search(r"^  norm_first True: the budget buys about [\d,]+ updates", out, re.M)  # a short run
    record = json.loads((checkout / model_dir / "budget.json").read_text(encoding="utf-8"))
    assert record["budget_minutes"] == 1.5 and record["updates"] > 0
    assert json.loads((checkout / model_dir / "run_config.json").read_text(encoding="utf-8"))["norm_first"] is True
    # 300 training lines: validation draws 7 (2.5%), the explicit test set leaves training as it is.
    assert "Training data: 293 pairs from libreoffice.train.tsv; skipped lines: none; " \
           "removed as copies of validation/test pairs: 0" in out
    assert re.search(r"^Test set: 2000 sentences, ", out, re.M)
    # The candidates printed are those scored: the last always, the average only of checkpoints in the cool-down.
    scored = json.loads((checkout / model_dir / "model_choice.json").read_text(encoding="utf-8"))["scores"]
    assert "last" in scored
    for name in ("last", "average", "best"):
        printed = re.search(rf"^  {name}( \(chosen\))? +sacreBLEU +\d+\.\d\d  chrF +\d+\.\d\d  exact match", out,
                            re.M)
        assert bool(printed) == (name in scored), name
    plotted = bash(checkout, docs_command(r"^python scripts/plot_history\.py ")).stdout.splitlines()
    output = re.search(r"--output (\S+)", docs_command(r"^python scripts/plot_history\.py ")).group(1)
    assert plotted[0].split() == ["updates", "minutes", "val_bleu", "val_chrf"]
    updates = [int(line.split()[0]) for line in plotted[1:-1]]  # at each sixth of training's time
    assert 1 <= len(updates) <= 6 and updates == sorted(set(updates)) and updates[-1] == record["updates"]
    assert plotted[-1] == output
    assert (checkout / output).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The README's way on to a served model: a file of sentences translated with the export, then TF Serving.
    bash(checkout, docs_command(r"^cut -f1 libreoffice\.test\.tsv "))
    sentences = (checkout / "help.txt").read_text(encoding="utf-8").splitlines()
    assert sentences == [source for source, _ in pairs[300:320]]
    translate = docs_command(r"^python scripts/translate\.py --model saved_models/libreoffice\.train ")
    bash(checkout, translate)
    output_file = re.search(r"> (\S+)$", translate).group(1)
    translated = (checkout / output_file).read_text(encoding="utf-8").split("\n")[:-1]  # not splitlines:
    # a tiny model's output may hold characters that splitlines() takes for line ends
    from keras_transformer.export.loading import load_translator

    export = re.search(r"--model (\S+)", translate).group(1)
    assert translated == load_translator(str(checkout / export)).translate(sentences).best
    from tests.helpers.serving_double import ServingDouble

    docker, curl = docs_command(r"^docker run .*libreoffice"), docs_command(r"^curl .*libreoffice")
    host_path, name = re.search(r'-v "\$PWD/([^:]+):/models/([^"]+)"', docker).groups()
    assert host_path == export and re.search(rf"-e MODEL_NAME={name}\b", docker) and "-p 8501:8501" in docker
    sentence = json.loads(re.search(r"-d '(.*?)'", curl).group(1))["instances"][0]
    with ServingDouble(name, str(checkout / host_path)) as server:
        rest = bash(checkout, curl.replace("localhost:8501", f"localhost:{server.rest_port}"))
    (prediction,) = json.loads(rest.stdout)["predictions"]
    assert prediction["translations"] == load_translator(str(checkout / export)).translate([sentence]).best[0]


def test_terminology_commands(tmp_path, trained_tiny_run):
    """The translating page's terminology commands, on a stand-in for the
    LibreOffice training part and the tiny trained run in the page's run
    folder: the glossary drawn, translations that carry its terms and the
    prefixes, evaluate.py's term-use rate of 100% with them, and the benchmark."""
    checkout = make_checkout(tmp_path)
    shutil.copytree(trained_tiny_run, checkout / "runs" / "libreoffice.train-small")
    contexts = [("Open the {} dialog.", "Öffnen Sie den Dialog {}."), ("Then choose {}.", "Wählen Sie dann {}.")]
    terms = (("Sheet Tab", "Register"), ("Undo", "Rückgängig"))
    pairs = [(source.format(term), target.format(translation)) for i in range(10)
             for source, target in contexts for term, translation in terms]
    write_tsv(checkout / "libreoffice.train.tsv", pairs)
    bash(checkout, docs_command(r"^python scripts/make_glossary\.py "))
    glossary = (checkout / "glossary.tsv").read_text(encoding="utf-8").splitlines()
    assert glossary[1:] == ["Sheet Tab\tRegister", "Undo\tRückgängig"]
    # The run's own vocabulary: glossary terms it can spell (numbers), constraints and prefixes.
    (checkout / "glossary.tsv").write_text("seven\tsieben\nhundred\tdreihundert\n", encoding="utf-8")
    sentences = ["It is half past seven.", "three hundred twenty-one", "My brother bought two apples."]
    (checkout / "sentences.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    (checkout / "terms.txt").write_text("acht\n\nzwei\tÄpfel\n", encoding="utf-8")
    (checkout / "prefixes.txt").write_text("\ndrei\nMein\n", encoding="utf-8")
    glossed = bash(checkout, docs_command(r"--glossary glossary\.tsv --input")).stdout.splitlines()
    assert len(glossed) == 3 and contains_term(glossed[0], "sieben") and contains_term(glossed[1], "dreihundert")
    steered = bash(checkout, docs_command(r"--constraints terms\.txt")).stdout.splitlines()
    assert contains_term(steered[0], "acht") and steered[1].startswith("drei") and steered[2].startswith("Mein")
    assert contains_term(steered[2], "zwei") and contains_term(steered[2], "Äpfel")
    evaluated = bash(checkout, docs_command(r"^python scripts/evaluate\.py --model-dir runs/libreoffice")).stdout
    assert re.search(r"^constrained:\n(.*\n){3}term use  100\.00% \(\d+ of \d+ constraints\)$", evaluated, re.M)
    timed = bash(checkout, docs_command(r"^python scripts/benchmark\.py --constrained "),
                 KT_TEST_SCALE=json.dumps({"benchmark.py": ["--constrained-sentences", "8", "--constrained-rounds",
                                                            "1", "--engines-batch", "4"]})).stdout
    assert re.search(r"^  constrained +batch 1: .* term use 100\.00% of 16$", timed, re.M)


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


EOLE = os.environ.get("KT_TEST_EOLE") or shutil.which("eole")


@pytest.mark.slow
@pytest.mark.skipif(not EOLE, reason="eole is not installed (it needs torch, which CI does not install). To run "
                    "this test: python -m venv eole-venv && eole-venv/bin/pip install torch==2.13.0 eole==0.6.4 "
                    "aiohttp, then KT_TEST_EOLE=eole-venv/bin/eole python -m pytest -k eole_peer_command")
def test_eole_peer_command(tmp_path, small_corpus):
    """The benchmark page's comparison with eole, on 600 built-in pairs and a
    4-minute budget a run (this package once, eole's probe, then its three
    to five learning rates): both sides train, translate the same test sentences, and
    the printed scores and ratios are those of the files; eole's printed
    updates are its chosen checkpoint's, the lowest validation perplexity of
    its runs."""
    import sacrebleu

    checkout = make_checkout(tmp_path)
    command = docs_command(r"^python scripts/benchmark\.py --peer-eole ")
    eole = re.search(r"--peer-eole (\S+)", command).group(1)
    os.makedirs(os.path.dirname(checkout / eole))
    os.symlink(os.path.abspath(EOLE), checkout / eole)
    train, test = small_corpus
    write_tsv(checkout / re.search(r"--dataset (\S+)", command).group(1), train[:600])
    write_tsv(checkout / re.search(r"--test (\S+)", command).group(1), test[:20])
    out = bash(checkout, command, timeout=2400,
               KT_TEST_SCALE=json.dumps({"benchmark.py": ["--time-budget", "4"]})).stdout
    # While eole trains (4 minutes a run here), its progress every minute.
    assert len(re.findall(r"^eole: training, (?:\d+ updates saved|no checkpoint yet), \d+\.\d minutes left$", out,
                          re.M)) >= 6
    sides = dict((name, (float(bleu), float(chrf), int(updates))) for name, bleu, chrf, updates in re.findall(
        r"^peer (\S+) +test sacreBLEU +(\d+\.\d\d)  chrF +(\d+\.\d\d) +(\d+) updates in", out, re.M))
    assert list(sides) == ["keras_transformer", "eole"]
    references = [t for _, t in test[:20]]
    for name, folder in (("keras_transformer", "ours"), ("eole", "eole")):
        hypotheses = open(checkout / "runs" / "eole_peer" / folder / "test.hypotheses.txt",
                          encoding="utf-8").read().splitlines()
        assert len(hypotheses) == 20
        assert sides[name][0] == round(sacrebleu.corpus_bleu(hypotheses, [references]).score, 2)
        assert sides[name][1] == round(sacrebleu.corpus_chrf(hypotheses, [references]).score, 2)
    choice = json.loads((checkout / "runs" / "eole_peer" / "eole" / "choice.json").read_text(encoding="utf-8"))
    assert choice["compute_dtype"] in ("bf16", "fp32")
    # The sweep, then a rate beyond its end for as long as the best rate was at one.
    factors = [run["factor"] for run in choice["runs"]]
    sweep = len(eole_peer.LEARNING_RATE_SWEEP)
    assert tuple(factors[:sweep]) == eole_peer.LEARNING_RATE_SWEEP
    for done in range(sweep, len(factors) + 1):
        assert eole_peer.next_rate_factor(choice["runs"][:done]) == (factors[done] if done < len(factors) else None)
    validated = [run for run in choice["runs"] if run["perplexity"] is not None]
    best = min(validated, key=lambda run: run["perplexity"])
    assert sides["eole"][2] == best["chosen"] > 0
    ratio = r"(\d+\.\d\dx|undefined \(eole: 0\))"
    line = re.search(rf"^peer keras_transformer / eole sacreBLEU: {ratio}(?: \(eole below 5 BLEU: not a meaningful "
                     rf"ratio\))?  chrF: {ratio}  \(nrefs", out, re.M)
    for (ours_score, eole_score), printed in zip(((sides["keras_transformer"][0], sides["eole"][0]),
                                                   (sides["keras_transformer"][1], sides["eole"][1])), line.groups()):
        if eole_score:
            assert float(printed[:-1]) == pytest.approx(ours_score / eole_score, abs=0.01)
        else:
            assert printed == "undefined (eole: 0)"
    assert "\nStill unequal: " in out


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


def test_export_command(trained_checkout):
    """The serving page's export: a new version beside the run's, recording
    the flags it was given and the package version."""
    import keras_transformer
    from keras_transformer.export import settings

    command = docs_command(r"^python scripts/export\.py --model-dir runs/numerals_en_de-small --beam-size ")
    base = re.search(r"--output (\S+)", command).group(1)
    before = settings.versions(trained_checkout / base)
    printed = bash(trained_checkout, command).stdout
    after = settings.versions(trained_checkout / base)
    assert after[0] == before[0] + 1 and f"{base}/{after[0]}" in printed
    recorded = settings.read_settings(trained_checkout / base / str(after[0]) / "assets")
    beam, alpha = re.search(r"--beam-size (\d+) --alpha ([\d.]+)", command).groups()
    assert (recorded["beam_size"], recorded["alpha"]) == (int(beam), float(alpha))
    assert recorded["keras_transformer_version"] == keras_transformer.__version__


def test_serving_benchmark_command(trained_checkout):
    """The serving comparison on the main job's run (here a tiny one): every
    engine's two figures, and ratios that follow from them."""
    command = docs_command(r"^python scripts/benchmark\.py --serving ")
    scale = ["--serving-sentences", "4", "--serving-rounds", "1", "--engines-batch", "2"]
    out = bash(trained_checkout, command, KT_TEST_SCALE=json.dumps({"benchmark.py": scale})).stdout
    rows = re.findall(r"^  (SavedModel|Translator|CTranslate2 float32|CTranslate2 int8) +batch 1: +(\d+\.\d\d) "
                      r"ms/sentence   batch 2: +(\d+\.\d\d) sentences/s$", out, re.M)
    figures = {name: (float(single), float(batched)) for name, single, batched in rows}
    assert list(figures) == ["SavedModel", "Translator", "CTranslate2 float32", "CTranslate2 int8"]
    assert re.search(r"^  CTranslate2 float32 reranked batch 1: ", out, re.M)
    assert "4 sentences of its test split" in out
    for name in ("SavedModel", "Translator"):
        latency, throughput = map(float, re.search(
            rf"^  {name} / CTranslate2 float32: (\d+\.\d\d)x at batch 1 \(speed\), (\d+\.\d\d)x at batch 2",
            out, re.M).groups())
        reference = figures["CTranslate2 float32"]
        assert latency == pytest.approx(reference[0] / figures[name][0], rel=0.05, abs=0.01)
        assert throughput == pytest.approx(figures[name][1] / reference[1], rel=0.05, abs=0.01)
