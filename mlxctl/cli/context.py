"""Per-invocation state shared by the root callback, the commands and the entry point.

Like httpie's ``Environment``: the streams live here so tests can replace them, and the
``--debug`` flag set by the root callback is still readable after a command has failed.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import TextIO

import typer

from mlxctl.cli.output import Output

_TRUE_WORDS = {"1", "true", "yes", "on"}


def debug_from_env() -> bool:
    """Whether MLXCTL_DEBUG asks for tracebacks (1/true/yes/on, as MLXCTL_OFFLINE reads)."""
    return os.environ.get("MLXCTL_DEBUG", "").strip().lower() in _TRUE_WORDS


@dataclass
class CliState:
    """What one run of the CLI knows beyond its arguments."""

    debug: bool = field(default_factory=debug_from_env)
    stdin: TextIO = field(default_factory=lambda: sys.stdin)
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)


def state_of(ctx: typer.Context) -> CliState:
    """The state of this invocation (created with defaults when run without the entry point)."""
    return ctx.ensure_object(CliState)


def output_for(ctx: typer.Context, *, json: bool = False, quiet: bool = False) -> Output:
    """An `Output` in the mode the flags ask for, writing to this invocation's streams."""
    state = state_of(ctx)
    return Output.from_flags(
        json=json, quiet=quiet, stdout=state.stdout, stderr=state.stderr, stdin=state.stdin
    )


def given_on_command_line(ctx: typer.Context, name: str) -> bool:
    """Whether option ``name`` was given on the command line (not left at its default).
    Compared by name: Typer runs on a click of its own, whose ParameterSource is not the
    installed click's."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"
