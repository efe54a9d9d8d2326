"""`serve --sse-ping-interval SECONDS`: a number of seconds, 0 or more; anything else is refused
in one line (and its hint) before a model is looked for."""

from __future__ import annotations

import pytest

from mlxctl.cli.serve import ping_interval
from mlxctl.errors import ExitStatus
from tests.cli.helpers import run_cli


@pytest.mark.parametrize("value", ["-1", "abc", "nan", "inf", ""])
def test_a_bad_interval_is_one_line_and_exit_bad_input(value):
    result = run_cli("serve", "--sse-ping-interval", value, "--model", "/no/such/model")
    assert result.returncode == ExitStatus.BAD_INPUT
    assert result.stderr.splitlines() == [
        f"mlxctl: error: --sse-ping-interval must be a number of seconds, 0 or more, got {value!r}",
        "hint: 5 sends a keep-alive after 5 s of silence; 0 turns them off",
    ]


@pytest.mark.parametrize(("value", "seconds"), [("5", 5.0), ("0.2", 0.2), ("0", 0.0)])
def test_a_good_interval_is_seconds(value, seconds):
    assert ping_interval(value) == seconds
