"""What a model is, from its headers alone: no weights are loaded.

``inspect_model(ref)`` reads config.json and the safetensors headers (an 8-byte little-endian
length, then a JSON table of dtype, shape and byte range per tensor), or a GGUF file's metadata
and tensor table, a CTranslate2 ``model.bin``'s variable table, or an ONNX graph's initialisers,
and reports the architecture, the parameter count (quantised tensors count their logical
parameters), dtype and quantisation, the size on disk, the context length, the chat template
and the tool-call / reasoning formats it implies, and the memory the model needs (weights + KV
cache at a context and batch size) against the memory MLX may use on this machine.

This module assembles the report and picks the reader for a folder or file; the readers live in
``inspect_safetensors`` (with ``inspect_config`` and ``inspect_params``), ``inspect_gguf``,
``inspect_ct2`` and ``inspect_onnx``, the memory estimate in ``inspect_memory``, the lookup in
``inspect_locate``.
Only :func:`memory_limit` imports MLX (and only when called); the rest reads files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mlxctl.errors import BadInputError, ModelFormatError
from mlxctl.models.catalog import catalog_entry
from mlxctl.models.inspect_config import read_chat_template
from mlxctl.models.inspect_ct2 import _ct2_facts, _is_ct2, read_ct2_variables
from mlxctl.models.inspect_facts import DTYPE_BYTES, _Facts, _size
from mlxctl.models.inspect_gguf import GGUFInfo, _gguf_facts, read_gguf_info
from mlxctl.models.inspect_locate import Located, locate
from mlxctl.models.inspect_memory import (
    DEFAULT_CONTEXT,
    ESTIMATE_DTYPES,
    estimate_memory,
    memory_limit,
    physical_memory,
)
from mlxctl.models.inspect_onnx import _onnx_facts
from mlxctl.models.inspect_safetensors import (
    TensorInfo,
    _safetensors_facts,
    _safetensors_files,
    read_safetensors_header,
)
from mlxctl.models.manifest import model_files
from mlxctl.models.store import ModelStore

__all__ = [
    "DEFAULT_CONTEXT",
    "DTYPE_BYTES",
    "ESTIMATE_DTYPES",
    "GGUFInfo",
    "Located",
    "TensorInfo",
    "estimate_memory",
    "inspect_model",
    "locate",
    "memory_limit",
    "physical_memory",
    "read_chat_template",
    "read_ct2_variables",
    "read_facts",
    "read_gguf_info",
    "read_safetensors_header",
    "template_formats",
]


def inspect_model(
    ref: str,
    *,
    context: int | None = None,
    batch: int = 1,
    dtype: str = "native",
    store: ModelStore | None = None,
    limit: tuple[int | None, str] | None = None,
) -> dict:
    """Everything ``mlxctl model inspect`` reports about ``ref``, as JSON-ready data.

    ``context`` and ``batch`` size the KV cache (the model's context length by default);
    ``dtype`` (native, float32, float16, bfloat16) is the dtype the weights would be run in.
    ``limit`` is (bytes, where from) to compare against; by default :func:`memory_limit`.
    """
    _check_estimate(context, batch, dtype)
    located = locate(ref, store)
    facts = read_facts(located.path)
    manifest = located.manifest or {}
    kind = _settle_kind(facts, manifest)
    return {
        "name": located.name,
        "path": str(located.path),
        "source": manifest.get("source") or located.origin,
        "kind": kind,
        **_describe(facts),
        "memory": estimate_memory(
            facts, context, batch, dtype, limit if limit is not None else memory_limit()
        ),
    }


def _check_estimate(context: int | None, batch: int, dtype: str) -> None:
    if dtype not in ESTIMATE_DTYPES:
        raise BadInputError(
            f"unknown dtype {dtype!r}", hint=f"choose one of: {', '.join(ESTIMATE_DTYPES)}"
        )
    if batch < 1 or (context is not None and context < 1):
        raise BadInputError("--context and --batch must be at least 1")


def _settle_kind(facts: _Facts, manifest: dict) -> str | None:
    """The model's kind (chat, stt, ...); settles ``facts.decoder`` where the headers did not."""
    kind = manifest.get("kind") or _catalog_kind(manifest.get("name"))
    if facts.decoder is None:
        facts.decoder = kind == "chat" if kind else facts.attention is not None
    if kind in ("stt", "tts", "embed"):
        facts.decoder = False
    elif kind is None and facts.decoder and facts.chat_template is not None:
        kind = "chat"
    return kind


def _describe(facts: _Facts) -> dict:
    """What the headers say, in the report's keys and order."""
    return {
        "format": facts.format,
        "architecture": facts.architecture,
        "model_type": facts.model_type,
        "parameters": facts.parameters,
        "dtype": facts.dtype,
        "quantization": facts.quantization,
        "tensor_types": facts.tensor_types,
        "size_bytes": sum(p.stat().st_size for p in facts.files),
        "files": len(facts.files),
        "context_length": facts.context_length,
        "chat_template": facts.chat_template is not None,
        **template_formats(facts.chat_template),
        "attention": facts.attention,
    }


def template_formats(template: str | None) -> dict:
    """The tool-call and reasoning formats a chat template implies (None when it shows none)."""
    from mlxctl.api.reasoning import detect_parser as detect_reasoning
    from mlxctl.api.toolcalls import detect_parser as detect_tools

    return {"tool_call_format": detect_tools(template), "reasoning_format": detect_reasoning(template)}


def _catalog_kind(name: Any) -> str | None:
    entry = catalog_entry(name) if isinstance(name, str) else None
    return entry.kind if entry is not None else None


def read_facts(path: Path) -> _Facts:
    """What the headers of the model at ``path`` (a folder or a .gguf file) say."""
    path = Path(path)
    if path.is_file():
        return _gguf_facts(path)
    files = model_files(path)
    names = {p.relative_to(path).as_posix(): p for p in files}
    ggufs = sorted((p for p in files if p.suffix.lower() == ".gguf"), key=_size, reverse=True)
    if ggufs and not any(n.endswith(".safetensors") for n in names):
        return _gguf_facts(ggufs[0])  # the largest, when there are several
    if "model.bin" in names and "config.json" in names and _is_ct2(names["model.bin"]):
        return _ct2_facts(path, names["model.bin"], files)
    if safetensors := _safetensors_files(path, files):
        return _safetensors_facts(path, safetensors, files)
    if onnx := [p for p in files if p.suffix.lower() == ".onnx"]:
        return _onnx_facts(onnx, files)
    raise ModelFormatError(
        f"{path} holds no model weights I can read",
        hint="expected *.safetensors with config.json, a .gguf file, a CTranslate2 model.bin "
        "or an .onnx file",
    )


def loaded_weights_bytes(path: Path, dtype: str = "auto") -> int | None:
    """The bytes of weights the model at ``path`` will take once `run`/`serve` load it with
    ``--dtype`` (auto: float32 on the CPU backend, as stored elsewhere), from its headers alone;
    None when they do not say. `serve` keeps its --max-loaded-gb budget with it before a load."""
    from mlxctl.models.loader import weight_dtype

    target = weight_dtype(dtype)  # imports MLX: only callers about to load a model need this
    as_loaded = "native" if target is None else str(target).rpartition(".")[2]
    if as_loaded not in ESTIMATE_DTYPES:
        return None
    return estimate_memory(read_facts(path), None, 1, as_loaded, (None, "unused"))["weights_bytes"]
