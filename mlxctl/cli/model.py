"""`mlxctl model ...`: find, fetch, inspect, convert, qualify and remove models.

This module only wires the `model` sub-app; each command lives in its own ``model_*`` module.
"""

from __future__ import annotations

import typer

from mlxctl.cli.model_acquire import acquire
from mlxctl.cli.model_convert import convert
from mlxctl.cli.model_inspect import inspect_
from mlxctl.cli.model_list import list_, rm
from mlxctl.cli.model_qualify import qualify

app = typer.Typer(name="model", help="Find, fetch, convert and check models.", no_args_is_help=True)
app.command("inspect")(inspect_)
app.command()(acquire)
app.command()(convert)
app.command()(qualify)
app.command("list")(list_)
app.command()(rm)
