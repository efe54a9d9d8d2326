"""man/mlxctl.1: NAME, SYNOPSIS, DESCRIPTION, OPTIONS, COMMANDS, EXIT STATUS, ENVIRONMENT."""

from __future__ import annotations

import enum
import inspect
import io
import tokenize

from cli_docs import roff
from cli_docs.tree import Command, Param, summary

ENVIRONMENT = {
    "MLXCTL_HOME": "Where mlxctl keeps models and downloaded wheels "
    "(default: $XDG_CACHE_HOME/mlxctl, else ~/.cache/mlxctl).",
    "MLXCTL_DEBUG": "Set to 1 to print full tracebacks on errors, as --debug does.",
    "MLXCTL_OFFLINE": "Set to 1 to stay off the network: only models already on disk "
    "or in the Hugging Face cache are used.",
    "MLXCTL_BLAS": "Set to off to not preload OpenBLAS for MLX's CPU backend on Linux.",
}


def render(root: Command, version: str, exit_status: type[enum.IntEnum]) -> str:
    """The whole man page as roff text (deterministic: no dates, no paths)."""
    lines = [
        f'.TH {root.name.upper()} 1 "" {roff.quoted(f"{root.name} {version}")} "User Commands"',
        ".SH NAME",
        roff.line(f"{root.name} - {summary(root.help)}"),
        ".SH SYNOPSIS",
        f".B {roff.escape(root.name)}",
        roff.line("[OPTIONS] COMMAND [ARGS]..."),
        ".SH DESCRIPTION",
        *roff.paragraphs(root.help),
        ".SH OPTIONS",
        *_params(root.options),
        ".SH COMMANDS",
        *_commands(root),
        ".SH EXIT STATUS",
        *_exit_statuses(exit_status),
        ".SH ENVIRONMENT",
        *_environment(),
    ]
    return "\n".join(lines) + "\n"


def _commands(root: Command) -> list[str]:
    lines = [roff.line("Every command accepts --help.")]
    for cmd in list(root.walk())[1:]:
        lines += [f".SS {roff.quoted(cmd.usage)}", *roff.paragraphs(cmd.help)]
        lines += _subcommand_list(cmd) + _params(cmd.arguments) + _params(cmd.options)
    return lines


def _subcommand_list(cmd: Command) -> list[str]:
    lines = []
    for sub in cmd.subcommands:
        lines += [".TP", f".B {roff.escape(sub.path[-1])}", roff.line(sub.short_help)]
    return lines


def _params(params: tuple[Param, ...]) -> list[str]:
    lines = []
    for param in params:
        term, text = param.help_record
        if param.flags == ("--help",):
            continue
        lines += [".TP", f".B {roff.escape(term)}", roff.line(" ".join(text.split()))]
    return lines


def _exit_statuses(exit_status: type[enum.IntEnum]) -> list[str]:
    notes = _member_comments(exit_status)
    lines = []
    for member in exit_status:
        text = notes.get(member.name, member.name.lower().replace("_", " "))
        lines += [".TP", f".B {member.value}", roff.line(f"{member.name}: {text}")]
    return lines


def _member_comments(cls: type) -> dict[str, str]:
    """``NAME = value  # comment`` comments of an enum's source, by member name."""
    notes, name = {}, None
    for tok in tokenize.generate_tokens(io.StringIO(inspect.getsource(cls)).readline):
        if tok.type == tokenize.NAME and name is None and tok.start[1] == 4:
            name = tok.string
        elif tok.type == tokenize.COMMENT and name:
            notes[name] = tok.string.lstrip("# ").strip()
        if tok.type in (tokenize.NEWLINE, tokenize.NL):
            name = None
    return notes


def _environment() -> list[str]:
    lines = []
    for name, text in ENVIRONMENT.items():
        lines += [".TP", f".B {name}", roff.line(text)]
    return lines
