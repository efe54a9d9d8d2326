"""`mlxctl serve --api-key` / `--api-key-file` as users run them: one of the two, never both.

MLXCTL_API_KEY is not a flag: with --api-key-file the file wins over it, quietly.
"""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from mlxctl.errors import ExitStatus
from mlxctl.server.runner import free_port
from tests.cli.helpers import REPO, clean_env, run_cli
from tests.server.infra import wait_until
from tests.server.test_infra_serve_cli import read_url

FILE_KEY = "key-from-the-file"


@pytest.fixture
def key_file(tmp_path):
    path = tmp_path / "api-key"
    path.write_text(FILE_KEY + "\n", encoding="utf-8")
    return path


def test_both_flags_exit_non_zero_with_one_line_naming_both(smollm2, key_file):
    result = run_cli("serve", "-m", str(smollm2.path), "--port", str(free_port()), "--api-key", "a",
                     "--api-key-file", str(key_file))
    assert result.returncode == ExitStatus.BAD_INPUT
    assert result.stderr.splitlines() == ["mlxctl: error: give --api-key or --api-key-file, not both"]
    assert "listening on" not in result.stdout + result.stderr


@pytest.mark.parametrize("env", [{}, {"MLXCTL_API_KEY": "key-from-the-variable"}], ids=["file-alone", "file-and-variable"])
def test_the_key_file_alone_is_the_key(smollm2, key_file, env):
    args = [sys.executable, "-m", "mlxctl", "serve", "-m", str(smollm2.path), "--port", str(free_port()),
            "--api-key-file", str(key_file), "--drain-grace", "1"]
    proc = subprocess.Popen(args, cwd=REPO, env=clean_env(env), stderr=subprocess.PIPE, text=True)
    try:
        url = read_url(proc)
        assert wait_until(lambda: _status(f"{url}/health") == 200, timeout=120, interval=0.25)
        assert _status(f"{url}/v1/models") == 401
        assert _status(f"{url}/v1/models", {"Authorization": "Bearer key-from-the-variable"}) == 401
        assert _status(f"{url}/v1/models", {"Authorization": f"Bearer {FILE_KEY}"}) == 200
    finally:
        proc.kill()
        proc.wait(10)


def _status(url: str, headers: dict | None = None) -> int:
    try:
        return httpx.get(url, headers=headers, timeout=5).status_code
    except httpx.TransportError:
        return 0
