"""The real `mlxctl` entry point in a subprocess: help, stubs, usage errors, version."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mlxctl import __version__
from mlxctl.errors import ExitStatus
from tests.cli.helpers import REPO, clean_env, run_cli

TOP_LEVEL = ["model", "run", "chat", "embed", "transcribe", "speak", "serve", "bench-serve", "top"]
MODEL_VERBS = ["inspect", "acquire", "convert", "qualify", "list", "rm"]
STUBS: list[list[str]] = [
    # none left: embed: tests/embed/test_cli.py; chat: tests/tui; transcribe and speak: tests/audio
]  # model inspect/acquire/list/rm: tests/cli/test_model_cli.py; convert/qualify: test_model_convert_qualify.py
HEAVY = ("mlx", "mlx_lm", "aiohttp", "textual")

IMPORTS_AFTER_HELP = """
import contextlib, io, json, sys
from mlxctl.cli.app import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    main(sys.argv[1:])
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in {heavy})))
""".format(heavy=set(HEAVY))


def _listed_commands(help_text: str) -> list[str]:
    section = help_text.split("Commands:", 1)[1]
    return [line.split()[0] for line in section.splitlines() if line.startswith("  ")]


def test_help_lists_every_command():
    result = run_cli("--help")
    assert result.returncode == 0, result.stderr
    assert sorted(_listed_commands(result.stdout)) == sorted(TOP_LEVEL)


def test_model_help_lists_every_subcommand():
    result = run_cli("model", "--help")
    assert result.returncode == 0, result.stderr
    assert sorted(_listed_commands(result.stdout)) == sorted(MODEL_VERBS)


HELP_PAGES = [["--help"], ["model", "--help"], ["run", "--help"], ["serve", "--help"], ["bench-serve", "--help"]]


@pytest.mark.parametrize("args", HELP_PAGES, ids=" ".join)
def test_help_imports_no_heavy_module(args):
    result = subprocess.run(
        [sys.executable, "-c", IMPORTS_AFTER_HELP, *args],
        cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


@pytest.mark.parametrize("args", STUBS, ids=" ".join)
def test_stub_verb_says_not_built(args):
    result = run_cli(*args)
    assert result.returncode == ExitStatus.NOT_IMPLEMENTED
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("mlxctl: ") and "not built yet" in lines[0]
    assert "Traceback" not in result.stderr


def test_unknown_command_is_a_usage_error():
    result = run_cli("frobnicate")
    assert result.returncode == ExitStatus.USAGE
    assert "No such command 'frobnicate'" in result.stderr
    assert result.stdout == ""


def test_unknown_option_is_a_usage_error():
    result = run_cli("serve", "--no-such-flag")
    assert result.returncode == ExitStatus.USAGE
    assert "Traceback" not in result.stderr


def test_version():
    result = run_cli("--version")
    assert result.returncode == 0
    assert result.stdout == f"mlxctl {__version__}\n"
    assert result.stderr == ""


def test_console_script_is_installed():
    result = subprocess.run(
        ["mlxctl", "--version"], env=clean_env(), capture_output=True, text=True, timeout=60
    )
    assert result.stdout == f"mlxctl {__version__}\n"
