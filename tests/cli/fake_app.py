"""A test-only CLI: the real root callback and entry point around commands that fail on purpose.

Run as ``python -m tests.cli.fake_app VERB`` from the repository root.
"""

from __future__ import annotations

import sys

import typer

from mlxctl.cli.app import root
from mlxctl.cli.context import output_for
from mlxctl.cli.entry import invoke
from mlxctl.cli.options import JsonOpt, QuietOpt
from mlxctl.errors import BadInputError

app = typer.Typer(rich_markup_mode=None, add_completion=False, pretty_exceptions_enable=False)
app.callback()(root)


@app.command()
def refuse() -> None:
    """Raise a user-facing error with a hint."""
    raise BadInputError("the prompt is empty", hint="pass a prompt or pipe one on stdin")


@app.command()
def crash() -> None:
    """Raise an error nobody classified (a bug)."""
    raise ValueError("something broke\nsecond line")


@app.command()
def interrupt() -> None:
    """Behave as if Ctrl-C was pressed."""
    raise KeyboardInterrupt


@app.command()
def flood(ctx: typer.Context) -> None:
    """Write far more than a pipe holds, line by line."""
    out = output_for(ctx)
    for i in range(200_000):
        out.text(f"line {i}\n")


@app.command()
def report(ctx: typer.Context, json: JsonOpt = False, quiet: QuietOpt = False) -> None:
    """Emit one result, a message and a warning."""
    out = output_for(ctx, json=json, quiet=quiet)
    out.message("working")
    out.data({"name": "tiny", "size": 3}, human="tiny (3 bytes)")
    out.warn("just a test")


def command() -> object:
    return typer.main.get_command(app)


if __name__ == "__main__":
    sys.exit(invoke(command(), sys.argv[1:]))
