"""Completions and the man page are generated from the command tree and must not go stale."""

from __future__ import annotations

import subprocess
import sys

from mlxctl.errors import ExitStatus
from tests.cli.helpers import REPO, clean_env

GENERATOR = REPO / "scripts" / "gen_cli_docs.py"


def _generate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(GENERATOR), *args],
        cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=120,
    )


def test_completions_and_man_page_are_up_to_date():
    result = _generate("--check")
    assert result.returncode == 0, (
        "generated CLI docs are stale; run: python scripts/gen_cli_docs.py\n" + result.stderr
    )


def test_check_lists_missing_files(tmp_path):
    result = _generate("--check", "--root", str(tmp_path))
    assert result.returncode == 1
    assert "stale: man/mlxctl.1" in result.stderr
    assert "stale: completions/_mlxctl" in result.stderr


def test_output_is_deterministic_and_has_no_absolute_paths(tmp_path):
    assert _generate("--root", str(tmp_path)).returncode == 0
    for path in tmp_path.rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert str(REPO) not in text and str(tmp_path) not in text, path
            assert text == (REPO / path.relative_to(tmp_path)).read_text(), path


def test_man_page_documents_every_command_exit_status_and_variable():
    page = (REPO / "man" / "mlxctl.1").read_text()
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "EXIT STATUS", "ENVIRONMENT"):
        assert f".SH {section}" in page
    for verb in ("run", "chat", "embed", "transcribe", "speak", "serve", "bench\\-serve", "top"):
        assert f'.SS "mlxctl {verb} ' in page
    for verb in ("inspect", "acquire", "convert", "qualify", "list", "rm"):
        assert f'.SS "mlxctl model {verb} ' in page
    for status in ExitStatus:
        assert f".B {status.value}\n{status.name}: " in page
    for name in ("MLXCTL_HOME", "MLXCTL_DEBUG", "MLXCTL_OFFLINE"):
        assert f".B {name}\n" in page


def test_completions_know_every_command():
    bash = (REPO / "completions" / "mlxctl.bash").read_text()
    fish = (REPO / "completions" / "mlxctl.fish").read_text()
    zsh = (REPO / "completions" / "_mlxctl").read_text()
    assert zsh.startswith("#compdef mlxctl\n")
    for verb in ("bench-serve", "model", "inspect", "rm"):
        assert verb in bash and f"-a '{verb}'" in fish and f"{verb}:" in zsh
