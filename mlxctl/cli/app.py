"""The `mlxctl` command tree. This module only wires commands; each lives in its own module.

Nothing here (or in any module it imports at the top) may import mlx, mlx_lm, aiohttp or
textual: commands import what they need inside their bodies, so ``mlxctl --help`` is fast.
"""

from __future__ import annotations

import sys
from typing import Annotated, NoReturn, Optional

import typer

from mlxctl import __version__
from mlxctl.cli import model, stubs
from mlxctl.cli.bench_serve import bench_serve
from mlxctl.cli.context import output_for, state_of
from mlxctl.cli.embed import embed
from mlxctl.cli.entry import invoke
from mlxctl.cli.run import run
from mlxctl.cli.serve import serve
from mlxctl.cli.speak import speak
from mlxctl.cli.transcribe import transcribe

DEBUG_HELP = "Show full tracebacks on errors (also MLXCTL_DEBUG=1)."
VERSION_HELP = "Show the version and exit."


def show_version(ctx: typer.Context, value: bool) -> None:
    """``--version``: print the version to stdout and stop."""
    if value:
        output_for(ctx).data(f"mlxctl {__version__}")
        raise typer.Exit()


def root(
    ctx: typer.Context,
    debug: Annotated[bool, typer.Option("--debug", help=DEBUG_HELP)] = False,
    version: Annotated[
        Optional[bool],
        typer.Option("--version", callback=show_version, is_eager=True, help=VERSION_HELP),
    ] = None,
) -> None:
    """Run models locally on MLX: generate, chat, serve, and manage the models."""
    state = state_of(ctx)
    state.debug = state.debug or debug


app = typer.Typer(
    name="mlxctl",
    no_args_is_help=True,
    add_completion=False,  # static completions are generated: scripts/gen_cli_docs.py
    rich_markup_mode=None,  # plain click help: no rich import, fast --help
    pretty_exceptions_enable=False,
)
app.callback()(root)
app.add_typer(model.app, name="model")
app.command()(run)
app.command()(serve)
app.command("bench-serve")(bench_serve)
app.command()(transcribe)
app.command()(speak)
app.command()(embed)
for _name, _command in stubs.COMMANDS.items():
    app.command(_name)(_command)


def main(argv: list[str] | None = None) -> NoReturn:
    """The console script: run the command tree and exit with its status."""
    from mlxctl import mlx_env

    mlx_env.set_defaults()  # before any command has MLX do work
    sys.exit(invoke(typer.main.get_command(app), argv))
