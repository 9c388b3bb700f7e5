"""The README's and docs/' commands, blocks and tables as tests read them, and a
user's checkout to run them in (tests/test_docs.py, and the main job's test)."""

import os
import re
import shlex
import socket
import subprocess
import sys

from tests.conftest import ROOT

README = os.path.join(ROOT, "README.md")
DOCS = os.path.join(ROOT, "docs")
# The task pages of docs/, each starting with the command a user types.
DOC_PAGES = ["training.md", "translating.md", "serving.md", "benchmarks.md", "architecture.md", "gpu.md",
             "limits.md", "reference.md", "results.md"]
PAGES = [README] + [os.path.join(DOCS, name) for name in DOC_PAGES]
DOCS_PYTHON = os.path.join(ROOT, "tests", "helpers", "docs_python.py")
# A fenced block: its language ("" when unlabelled) and its code.
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)


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


def checkout_environment(checkout, **env):
    """The environment documented commands run in: the checkout's `python` first on PATH, no TF_CONFIG."""
    environment = dict(os.environ, PATH=f"{checkout / 'bin'}{os.pathsep}{os.environ['PATH']}",
                       TF_CPP_MIN_LOG_LEVEL="2", **env)
    environment.pop("TF_CONFIG", None)
    return environment


def bash(checkout, command, timeout=900, **env):
    """Runs one documented command in the checkout; the result, after checking it succeeded."""
    result = subprocess.run(["bash", "-c", command], cwd=checkout, capture_output=True, text=True,
                            timeout=timeout, env=checkout_environment(checkout, **env))
    assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
