"""Output modes with injected streams, and `invoke` writing to an injected state."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from mlxctl.cli.context import CliState
from mlxctl.cli.entry import invoke
from mlxctl.cli.output import Mode, Output, render_text
from mlxctl.errors import ExitStatus
from tests.cli import fake_app


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def make(mode: Mode, stderr: io.StringIO | None = None) -> tuple[Output, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), stderr if stderr is not None else io.StringIO()
    return Output(mode, stdout=out, stderr=err, stdin=io.StringIO("piped")), out, err


@dataclass
class Info:
    name: str
    path: Path


def test_human_data_goes_to_stdout_messages_to_stderr():
    output, out, err = make(Mode.HUMAN)
    output.message("loading")
    output.data({"a": 1}, human="one thing")
    assert out.getvalue() == "one thing\n"
    assert err.getvalue() == "loading\n"


def test_json_is_one_document_and_dataclasses_and_paths_serialize():
    output, out, _ = make(Mode.JSON)
    output.data([Info("tiny", Path("/m/tiny"))])
    assert json.loads(out.getvalue()) == [{"name": "tiny", "path": "/m/tiny"}]
    with pytest.raises(RuntimeError):
        output.data({"second": True})


def test_json_mode_refuses_raw_text():
    output, _, _ = make(Mode.JSON)
    with pytest.raises(RuntimeError):
        output.text("token")


def test_quiet_keeps_data_and_warnings_only():
    output, out, err = make(Mode.QUIET, stderr=Tty())
    output.message("loading")
    output.progress("50%")
    output.warn("careful")
    output.data(["a", "b"])
    assert out.getvalue() == "a\nb\n"
    assert err.getvalue() == "mlxctl: warning: careful\n"


def test_progress_only_on_a_terminal():
    output, _, err = make(Mode.HUMAN)
    output.progress("50%")
    assert err.getvalue() == ""
    output, _, err = make(Mode.HUMAN, stderr=Tty())
    output.progress("50%")
    assert err.getvalue() == "50%\n"


def test_stdin_is_injected():
    output, _, _ = make(Mode.HUMAN)
    assert not output.stdin_is_tty
    assert output.read_stdin() == "piped"


def test_render_text():
    assert render_text({"name": "tiny", "size": 3}) == "name: tiny\nsize: 3"
    assert render_text(Info("x", Path("p"))) == "name: x\npath: p"


def test_invoke_writes_to_the_injected_streams():
    state = CliState(debug=False, stdout=io.StringIO(), stderr=io.StringIO())
    status = invoke(fake_app.command(), ["report", "--json"], state)
    assert status == 0
    assert json.loads(state.stdout.getvalue()) == {"name": "tiny", "size": 3}
    assert "working" in state.stderr.getvalue()


def test_invoke_reports_an_mlxctl_error_in_process():
    state = CliState(debug=False, stdout=io.StringIO(), stderr=io.StringIO())
    assert invoke(fake_app.command(), ["refuse"], state) == ExitStatus.BAD_INPUT
    assert state.stderr.getvalue().splitlines()[0] == "mlxctl: error: the prompt is empty"
    assert "Traceback" not in state.stderr.getvalue()
