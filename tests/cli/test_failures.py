"""How a run ends: errors, tracebacks, Ctrl-C and closed pipes, through a test-only app."""

from __future__ import annotations

import subprocess
import sys

from mlxctl.errors import ExitStatus
from tests.cli.helpers import REPO, clean_env, run_cli

FAKE = "tests.cli.fake_app"


def test_mlxctl_error_is_one_line_and_a_hint():
    result = run_cli("refuse", module=FAKE)
    assert result.returncode == ExitStatus.BAD_INPUT
    assert result.stderr.splitlines() == [
        "mlxctl: error: the prompt is empty",
        "hint: pass a prompt or pipe one on stdin",
    ]
    assert result.stdout == ""


def test_debug_flag_adds_the_traceback():
    result = run_cli("--debug", "refuse", module=FAKE)
    assert result.returncode == ExitStatus.BAD_INPUT
    assert "Traceback (most recent call last)" in result.stderr
    assert result.stderr.splitlines()[-2:] == [
        "mlxctl: error: the prompt is empty",
        "hint: pass a prompt or pipe one on stdin",
    ]


def test_debug_env_adds_the_traceback():
    result = run_cli("refuse", module=FAKE, env={"MLXCTL_DEBUG": "1"})
    assert "Traceback (most recent call last)" in result.stderr


def test_unexpected_error_is_one_line_and_status_1():
    result = run_cli("crash", module=FAKE)
    assert result.returncode == ExitStatus.ERROR
    assert result.stderr.splitlines() == [
        "mlxctl: error: ValueError: something broke (run with --debug for the traceback)"
    ]


def test_unexpected_error_with_debug_shows_the_traceback():
    result = run_cli("--debug", "crash", module=FAKE)
    assert result.returncode == ExitStatus.ERROR
    assert "Traceback (most recent call last)" in result.stderr
    assert 'raise ValueError("something broke' in result.stderr


def test_keyboard_interrupt_is_quiet_130():
    result = run_cli("interrupt", module=FAKE)
    assert result.returncode == ExitStatus.INTERRUPTED
    assert result.stderr == ""


def test_closed_stdout_is_a_quiet_exit():
    """`mlxctl ... | head -1`: no BrokenPipeError noise when the reader goes away."""
    proc = subprocess.Popen(
        [sys.executable, "-m", FAKE, "flood"], cwd=REPO, env=clean_env(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stdout.readline() == "line 0\n"
    proc.stdout.close()
    stderr = proc.stderr.read()
    proc.wait(timeout=60)
    assert stderr == ""
    assert proc.returncode == ExitStatus.ERROR


def test_json_mode_prints_json_on_stdout_and_messages_on_stderr():
    import json

    result = run_cli("report", "--json", module=FAKE)
    assert result.returncode == 0
    assert json.loads(result.stdout) == {"name": "tiny", "size": 3}
    assert result.stderr.splitlines() == ["working", "mlxctl: warning: just a test"]


def test_json_and_quiet_together_is_a_usage_error():
    result = run_cli("report", "--json", "-q", module=FAKE)
    assert result.returncode == ExitStatus.USAGE
    assert "--json and --quiet cannot be used together" in result.stderr
