"""`mlxctl model ...`: find, fetch, convert and check models (not built yet)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from mlxctl.cli.options import JsonOpt, ModelArg, OutputPathOpt, QuietOpt, YesOpt
from mlxctl.cli.stubs import not_built

RevisionOpt = Annotated[
    Optional[str],
    typer.Option(
        "--revision", metavar="REV", help="Branch, tag or commit to fetch.", show_default=False
    ),
]
BitsOpt = Annotated[
    Optional[int],
    typer.Option(
        "--bits", metavar="BITS", help="Quantize weights to this many bits.", show_default=False
    ),
]
ModelArgs = Annotated[
    list[str], typer.Argument(metavar="MODEL", help="Models to remove.", show_default=False)
]

app = typer.Typer(name="model", help="Find, fetch, convert and check models.", no_args_is_help=True)


@app.command("inspect")
def inspect_(model: ModelArg, json: JsonOpt = False) -> None:
    """Show what MODEL is and where it lives.

    Architecture, size, quantization and the backend that would run it.
    """
    raise not_built("model inspect")


@app.command()
def acquire(model: ModelArg, revision: RevisionOpt = None, quiet: QuietOpt = False) -> None:
    """Download MODEL into the local store."""
    raise not_built("model acquire")


@app.command()
def convert(model: ModelArg, bits: BitsOpt = None, output: OutputPathOpt = None) -> None:
    """Convert MODEL to MLX format, optionally quantized."""
    raise not_built("model convert")


@app.command()
def qualify(model: ModelArg, json: JsonOpt = False) -> None:
    """Check that MODEL loads and generates sensibly on this machine."""
    raise not_built("model qualify")


@app.command("list")
def list_(json: JsonOpt = False, quiet: QuietOpt = False) -> None:
    """List the models in the local store."""
    raise not_built("model list")


@app.command()
def rm(models: ModelArgs, yes: YesOpt = False) -> None:
    """Remove models from the local store."""
    raise not_built("model rm")
