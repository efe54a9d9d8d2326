"""`mlxctl model inspect`: what a model is, from its file headers, and the memory it needs."""

from __future__ import annotations

from typing import Annotated

import typer

from mlxctl.cli.context import output_for
from mlxctl.cli.model_human import human_bytes, render
from mlxctl.cli.options import JsonOpt, ModelArg

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


def human_count(n: int | None) -> str:
    if n is None:
        return "unknown"
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit} ({n:,})"
    return str(n)


def _inspect_table(report: dict) -> str:
    from rich.table import Table

    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for label, value in _inspect_rows(report):
        table.add_row(label, value)
    return render(table)


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
        rows.append(("Attention", f"{heads} x {a['head_dim']}{_window_text(a)}"))
    rows += _memory_rows(r["memory"])
    return [(label, value or "-") for label, value in rows]


def _window_text(a: dict) -> str:
    if not a.get("sliding_window"):
        return ""
    window, sliding = a["sliding_window"], a["sliding_layers"]
    return f"; sliding window {window} on {sliding} of {a['layers']} layers"


def _files(n: int) -> str:
    return f"{n} file" if n == 1 else f"{n} files"


def _quant_text(q: dict | None) -> str:
    if not q:
        return "none"
    if q.get("method") == "gguf":
        text = f"{q['type']} ({q['bits']}-bit, blocks of {q['group_size']})"
        text = f"GGUF {q['file_type']}: mostly {text}" if q.get("file_type") else f"GGUF {text}"
        extra = sorted(set(q["overrides"].values()))
        return text + (f"; also {', '.join(extra)} in {len(q['overrides'])} tensors" if extra else "")
    text = f"{q.get('bits')}-bit {q.get('mode') or q.get('method')}"
    if q.get("group_size") is not None:
        text += f", group size {q['group_size']}"
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
