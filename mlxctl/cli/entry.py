"""How one run of the CLI ends: the exit status and what, if anything, goes to stderr.

Click's standalone mode is off so this module decides: an `MlxctlError` is one line (and a
hint) with its own exit status, usage errors keep click's message and status 2, Ctrl-C is a
quiet 130, a closed stdout (``| head -1``) is a quiet exit, and anything else is one line
and status 1. Tracebacks only with ``--debug`` or MLXCTL_DEBUG=1.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Sequence
from typing import Any, TextIO

import typer

from mlxctl.cli.context import CliState
from mlxctl.errors import ExitStatus, MlxctlError

PROG_NAME = "mlxctl"


def invoke(command: Any, args: Sequence[str] | None = None, state: CliState | None = None) -> int:
    """Run a click command built from a Typer app; return the process exit status."""
    state = state if state is not None else CliState()
    try:
        status = _run(command, args, state)
    except BrokenPipeError:
        status = ExitStatus.ERROR
    _settle_stdout(state.stdout)
    return int(status)


def _run(command: Any, args: Sequence[str] | None, state: CliState) -> int:
    try:
        result = command.main(args=args, prog_name=PROG_NAME, standalone_mode=False, obj=state)
    except MlxctlError as exc:
        return _fail(state, exc, error_lines(exc), exc.exit_status)
    except typer.TyperException as exc:  # click's usage errors, shown as click shows them
        return _show_click_error(exc, state.stderr)
    except typer.Abort as exc:
        return _fail(state, exc, [f"{PROG_NAME}: aborted"], ExitStatus.ERROR)
    except KeyboardInterrupt:
        return ExitStatus.INTERRUPTED
    except SystemExit as exc:  # click turns EPIPE on stdout into sys.exit(1)
        return _system_exit_code(exc, state.stderr)
    except BrokenPipeError:
        raise
    except Exception as exc:
        return _fail(state, exc, [unexpected_line(exc, state.debug)], ExitStatus.ERROR)
    return _exit_code(result)


def error_lines(exc: MlxctlError) -> list[str]:
    """``mlxctl: error: <message>`` and, when there is one, ``hint: <hint>``."""
    lines = [f"{PROG_NAME}: error: {exc.message}"]
    if exc.hint:
        lines.append(f"hint: {exc.hint}")
    return lines


def unexpected_line(exc: BaseException, debug: bool) -> str:
    """One line for an error we did not classify (a bug): its type and first line."""
    text = str(exc).strip().splitlines()
    what = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
    tail = "" if debug else " (run with --debug for the traceback)"
    return f"{PROG_NAME}: error: {what}{tail}"


def _fail(state: CliState, exc: BaseException, lines: list[str], status: int) -> int:
    if state.debug:
        traceback.print_exception(exc, file=state.stderr)
    state.stderr.write("".join(line + "\n" for line in lines))
    state.stderr.flush()
    return int(status)


def _show_click_error(exc: typer.TyperException, stderr: TextIO) -> int:
    show = getattr(exc, "show", None)
    if show is not None:
        show(file=stderr)
    else:
        stderr.write(f"{PROG_NAME}: error: {exc.format_message()}\n")
    return int(getattr(exc, "exit_code", ExitStatus.ERROR))


def _exit_code(result: Any) -> int:
    """A command's return value: an int is an exit status (``typer.Exit(n)`` arrives so)."""
    if isinstance(result, int) and not isinstance(result, bool):
        return result
    return ExitStatus.OK


def _system_exit_code(exc: SystemExit, stderr: TextIO) -> int:
    if exc.code is None or isinstance(exc.code, int):
        return exc.code or ExitStatus.OK
    stderr.write(f"{exc.code}\n")
    return ExitStatus.ERROR


def _settle_stdout(stdout: TextIO) -> None:
    """Flush stdout; if the reader has gone, point it at /dev/null so that the interpreter's
    own flush at exit stays quiet (the recipe in Python's `signal` module docs)."""
    try:
        stdout.flush()
    except BrokenPipeError:
        _stdout_to_devnull(stdout)
    except ValueError:  # closed by the command
        pass


def _stdout_to_devnull(stdout: TextIO) -> None:
    try:
        fd = stdout.fileno()
    except (OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
