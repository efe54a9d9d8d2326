"""The command tree as plain data, read once from click's public objects.

Everything the generators need (names, help, usage pieces, option help records, flags and
choices) comes from the command objects Typer builds, so the outputs follow the code.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import typer

HELP_FLAG = "--help"


@dataclass(frozen=True)
class Param:
    """One option or argument."""

    kind: str  # "option" or "argument"
    name: str  # the metavar-ish name for arguments, the first long flag for options
    flags: tuple[str, ...]  # every spelling (--x, -x, --no-x); empty for arguments
    takes_value: bool
    choices: tuple[str, ...]
    help: str  # the help text alone
    help_record: tuple[str, str]  # (term, text) exactly as --help prints them
    variadic: bool = False


@dataclass(frozen=True)
class Command:
    """One command or group; the root has path ("mlxctl",)."""

    path: tuple[str, ...]
    help: str
    short_help: str
    usage: str
    params: tuple[Param, ...]
    subcommands: tuple[Command, ...]

    @property
    def name(self) -> str:
        return " ".join(self.path)

    @property
    def options(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.kind == "option")

    @property
    def arguments(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.kind == "argument")

    def walk(self) -> Iterator[Command]:
        """This command and all below it, depth first, in definition order."""
        yield self
        for sub in self.subcommands:
            yield from sub.walk()


def read_tree(app: typer.Typer, prog_name: str) -> Command:
    """The whole tree of a Typer app."""
    root = typer.main.get_command(app)
    return _command(root, typer.Context(root, info_name=prog_name), (prog_name,))


def _command(cmd: Any, ctx: Any, path: tuple[str, ...]) -> Command:
    visible = [p for p in cmd.get_params(ctx) if not getattr(p, "hidden", False)]
    return Command(
        path=path,
        help=clean_help(cmd.help or ""),
        short_help=cmd.get_short_help_str(limit=80).rstrip("."),
        usage=" ".join([*path, *cmd.collect_usage_pieces(ctx)]),
        params=tuple(_param(p, ctx) for p in visible),
        subcommands=tuple(_subcommands(cmd, ctx, path)),
    )


def _subcommands(cmd: Any, ctx: Any, path: tuple[str, ...]) -> Iterator[Command]:
    for name, sub in getattr(cmd, "commands", {}).items():
        if not sub.hidden:
            yield _command(sub, typer.Context(sub, info_name=name, parent=ctx), (*path, name))


def _param(param: Any, ctx: Any) -> Param:
    is_option = param.param_type_name == "option"
    flags = tuple(param.opts) + tuple(param.secondary_opts) if is_option else ()
    term, text = param.get_help_record(ctx) or (param.name, "")
    return Param(
        kind="option" if is_option else "argument",
        name=_long_flag(flags) if is_option else (param.metavar or param.name).upper(),
        flags=flags,
        takes_value=not (is_option and (param.is_flag or param.count)),
        choices=_choices(param, ctx),
        help=getattr(param, "help", None) or "",
        help_record=(term, text),
        variadic=param.nargs == -1 or bool(getattr(param, "multiple", False)),
    )


def _choices(param: Any, ctx: Any) -> tuple[str, ...]:
    """Fixed choices (enum, Literal), via click's public ``shell_complete``.

    An ``autocompletion=`` callback is called here too: keep those free of machine state
    (a model store listing would be baked into the files and make ``--check`` flap).
    """
    items = param.shell_complete(ctx, "")
    return tuple(item.value for item in items if item.type == "plain" and item.value)


def _long_flag(flags: tuple[str, ...]) -> str:
    return next((f for f in flags if f.startswith("--")), flags[0])


def clean_help(text: str) -> str:
    """Help as click shows it: cut at ``\\f``, ``\\b`` markers removed."""
    text = text.split("\f", 1)[0]
    return "\n".join(line for line in text.strip().splitlines() if line.strip() != "\b")


def summary(text: str) -> str:
    """The first sentence (or line) of a help text, one line, no final period."""
    first = " ".join(text.strip().split("\n\n", 1)[0].split())
    sentence = first.split(". ", 1)[0]
    return sentence.rstrip(".")
