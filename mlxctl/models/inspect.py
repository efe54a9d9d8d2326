"""What a model is, from its headers alone: no weights are loaded.

``inspect_model(ref)`` reads config.json and the safetensors headers (an 8-byte little-endian
length, then a JSON table of dtype, shape and byte range per tensor), or a GGUF file's metadata
and tensor table, or a CTranslate2 ``model.bin``'s variable table, and reports the architecture,
the parameter count (quantised tensors count their logical parameters), dtype and quantisation,
the size on disk, the context length, the chat template and the tool-call / reasoning formats it
implies, and the memory the model needs (weights + KV cache at a context and batch size) against
the memory MLX may use on this machine.

Only :func:`memory_limit` imports MLX (and only when called); the rest reads files.
"""

from __future__ import annotations

import json
import os
import re
import struct
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from math import prod
from pathlib import Path
from typing import Any, BinaryIO

from mlxctl.errors import BadInputError, ModelFormatError, ModelNotFoundError
from mlxctl.models.catalog import catalog_entry, catalog_names
from mlxctl.models.manifest import model_files, read_manifest
from mlxctl.models.store import ModelStore

ESTIMATE_DTYPES = ("native", "float32", "float16", "bfloat16")
DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "float8": 1}
DEFAULT_CONTEXT = 4096  # for the estimate, when the model does not say

_SAFETENSORS_DTYPES = {
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
    "F8_E4M3": "float8", "F8_E5M2": "float8", "I64": "int64", "I32": "int32", "I16": "int16",
    "I8": "int8", "U64": "uint64", "U32": "uint32", "U16": "uint16", "U8": "uint8", "BOOL": "bool",
}  # fmt: skip
_ELEMENT_BITS = {"uint32": 32, "int32": 32, "uint16": 16, "uint8": 8, "int8": 8}
_CONTEXT_KEYS = ("max_position_embeddings", "max_seq_len", "seq_length", "n_positions", "n_ctx")
_MAX_SAFETENSORS_HEADER = 100 << 20
_QUANT_OVERHEAD = ("scales", "biases")
_SKIP_SUFFIXES = ("weight_scale_inv", "weight_scale", "input_scale", "qzeros", "g_idx")
_DECODER_SUFFIXES = ("ForCausalLM", "ForConditionalGeneration", "LMHeadModel")
_CT2_DTYPES = {0: "float32", 1: "int8", 2: "int16", 3: "int32", 4: "float16", 5: "bfloat16"}


@dataclass(frozen=True)
class Located:
    """Where a reference points: a model folder or a GGUF file, and what the store knows."""

    name: str
    path: Path
    origin: str  # "store", "folder", "gguf", "hf"
    manifest: dict | None = None


@dataclass
class _Facts:
    """What the headers say; every field may be unknown for some formats."""

    format: str
    files: list[Path]
    architecture: str | None = None
    model_type: str | None = None
    parameters: int | None = None
    weights_bytes: int | None = None
    dtype: str | None = None
    quantization: dict | None = None
    tensor_types: dict[str, dict] = field(default_factory=dict)
    context_length: int | None = None
    attention: dict | None = None  # layers, kv_heads, head_dim, (value_dim)
    chat_template: str | None = None
    decoder: bool | None = None


# --- locating -----------------------------------------------------------------------------


def locate(ref: str, store: ModelStore | None = None) -> Located:
    """Find ``ref`` without downloading: a store name, a folder, a .gguf file, a cached HF repo."""
    store = store if store is not None else ModelStore()
    ref = ref.strip()
    if not ref:
        raise BadInputError("the model reference is empty")
    if "/" not in ref and ref not in (".", "..") and store.has(ref):
        folder = store.model_path(ref)
        return Located(ref, folder, "store", read_manifest(folder))
    if catalog_entry(ref) is not None:
        raise ModelNotFoundError(
            f"{ref} is a catalog model that is not in the store yet",
            hint=f"fetch it first: mlxctl model acquire {ref}",
        )
    path = Path(ref).expanduser()
    if path.is_dir():
        return Located(path.resolve().name, path.resolve(), "folder", read_manifest(path))
    if path.is_file():
        if path.suffix.lower() != ".gguf":
            raise ModelFormatError(
                f"{path} is not a model", hint="give a folder with config.json or a .gguf file"
            )
        return Located(path.stem, path.resolve(), "gguf")
    if _looks_like_path(ref):
        raise ModelNotFoundError(f"no such file or folder: {ref}")
    if re.match(r"^[\w.-]+/[\w.-]+(?:@[\w./-]+)?$", ref):
        from mlxctl.models.acquire import cached_snapshot

        repo_id, _, revision = ref.partition("@")
        if (snapshot := cached_snapshot(repo_id, revision or None)) is not None:
            return Located(repo_id, snapshot, "hf")
        raise ModelNotFoundError(
            f"{repo_id} is not in the local Hugging Face cache",
            hint=f"inspect reads local files only; fetch it first: mlxctl model acquire {ref}",
        )
    raise ModelNotFoundError(
        f"unknown model {ref!r}",
        hint=f"give a model in the store (mlxctl model list), a catalog model "
        f"({', '.join(catalog_names())}), a folder, a .gguf file or a cached repo id",
    )


def _looks_like_path(ref: str) -> bool:
    name = ref.partition("@")[0]
    return name.lower().endswith(".gguf") or name.startswith((".", "/", "~")) or name.count("/") > 1


# --- the report ---------------------------------------------------------------------------


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
    if dtype not in ESTIMATE_DTYPES:
        raise BadInputError(
            f"unknown dtype {dtype!r}", hint=f"choose one of: {', '.join(ESTIMATE_DTYPES)}"
        )
    if batch < 1 or (context is not None and context < 1):
        raise BadInputError("--context and --batch must be at least 1")
    located = locate(ref, store)
    facts = read_facts(located.path)
    manifest = located.manifest or {}
    kind = manifest.get("kind") or _catalog_kind(manifest.get("name"))
    if facts.decoder is None:
        facts.decoder = kind == "chat" if kind else facts.attention is not None
    if kind in ("stt", "tts", "embed"):
        facts.decoder = False
    elif kind is None and facts.decoder and facts.chat_template is not None:
        kind = "chat"
    return {
        "name": located.name,
        "path": str(located.path),
        "source": manifest.get("source") or located.origin,
        "kind": kind,
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
        "memory": estimate_memory(facts, context, batch, dtype, limit),
    }


def template_formats(template: str | None) -> dict:
    """The tool-call and reasoning formats a chat template implies (None when it shows none)."""
    from mlxctl.api.reasoning import detect_parser as detect_reasoning
    from mlxctl.api.toolcalls import detect_parser as detect_tools

    return {"tool_call_format": detect_tools(template), "reasoning_format": detect_reasoning(template)}


def estimate_memory(
    facts: _Facts, context: int | None, batch: int, dtype: str, limit: tuple[int | None, str] | None
) -> dict:
    """Weights + KV cache, in bytes, and whether that fits in ``limit`` (or this machine's)."""
    weights = facts.weights_bytes
    if dtype != "native" and facts.parameters is not None:
        weights = facts.parameters * DTYPE_BYTES[dtype]
    context = context or facts.context_length or DEFAULT_CONTEXT
    per_token = _kv_bytes_per_token(facts, dtype) if facts.decoder else None
    kv = per_token * context * batch if per_token is not None else None
    total = None if weights is None else weights + (kv or 0)
    limit_bytes, limit_source = limit if limit is not None else memory_limit()
    return {
        "dtype": dtype,
        "context": context if per_token is not None else None,
        "batch": batch if per_token is not None else None,
        "weights_bytes": weights,
        "kv_bytes_per_token": per_token,
        "kv_cache_bytes": kv,
        "total_bytes": total,
        "limit_bytes": limit_bytes,
        "limit_source": limit_source,
        "fits": None if total is None or limit_bytes is None else total <= limit_bytes,
    }


def _kv_bytes_per_token(facts: _Facts, dtype: str) -> int | None:
    attention = facts.attention
    if not attention or not all(attention.get(k) for k in ("layers", "kv_heads", "head_dim")):
        return None
    element = DTYPE_BYTES.get(dtype) or DTYPE_BYTES.get(facts.dtype or "", 2)
    dims = attention["head_dim"] + attention.get("value_dim", attention["head_dim"])
    return attention["layers"] * attention["kv_heads"] * dims * element


def memory_limit() -> tuple[int | None, str]:
    """(bytes MLX may use here, where the number comes from): MLX's limit, else physical RAM."""
    try:
        import mlx.core as mx

        getter = getattr(mx, "get_memory_limit", None) or mx.metal.get_memory_limit
        value = int(getter())
        if value > 0:
            return value, "mlx memory limit"
    except (ImportError, AttributeError, RuntimeError, ValueError):
        pass
    physical = physical_memory()
    return physical, "physical memory" if physical else "unknown"


def physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _catalog_kind(name: Any) -> str | None:
    entry = catalog_entry(name) if isinstance(name, str) else None
    return entry.kind if entry is not None else None


# --- reading a folder or file ---------------------------------------------------------------


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
        return _Facts(format="onnx", files=files, weights_bytes=sum(map(_size, onnx)))
    raise ModelFormatError(
        f"{path} holds no model weights I can read",
        hint="expected *.safetensors with config.json, a .gguf file, a CTranslate2 model.bin "
        "or an .onnx file",
    )


def _size(path: Path) -> int:
    return path.stat().st_size


def _safetensors_files(folder: Path, files: list[Path]) -> list[Path]:
    found = [p for p in files if p.suffix == ".safetensors" and p.parent == folder]
    preferred = [p for p in found if p.name.startswith("model")]
    return preferred or found


# --- safetensors ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TensorInfo:
    dtype: str  # numpy-style name: float16, uint32, ...
    shape: tuple[int, ...]
    nbytes: int


def read_safetensors_header(path: Path) -> tuple[dict[str, TensorInfo], dict]:
    """The tensors (name -> dtype, shape, size) and the ``__metadata__`` of a safetensors file."""
    path = Path(path)
    size = _size(path)
    try:
        with open(path, "rb") as f:
            (length,) = struct.unpack("<Q", f.read(8))
            if length > min(size - 8, _MAX_SAFETENSORS_HEADER):
                raise ValueError("header length out of range")
            header = json.loads(f.read(length))
        if not isinstance(header, dict):
            raise ValueError("header is not a JSON object")  # noqa: TRY004
        metadata = header.pop("__metadata__", None) or {}
        tensors = {name: _tensor_info(entry) for name, entry in header.items()}
    except (struct.error, ValueError, KeyError, TypeError) as e:
        raise ModelFormatError(f"{path.name} is not a valid safetensors file ({e})") from None
    return tensors, metadata


def _tensor_info(entry: Mapping) -> TensorInfo:
    start, end = entry["data_offsets"]
    dtype = _SAFETENSORS_DTYPES.get(entry["dtype"], str(entry["dtype"]).lower())
    return TensorInfo(dtype, tuple(int(d) for d in entry["shape"]), int(end) - int(start))


def _safetensors_facts(folder: Path, weights: list[Path], files: list[Path]) -> _Facts:
    config = _read_config(folder)
    tensors: dict[str, TensorInfo] = {}
    is_mlx = False
    for path in weights:
        found, metadata = read_safetensors_header(path)
        tensors.update(found)
        is_mlx = is_mlx or metadata.get("format") == "mlx"
    quant_config = config.get("quantization") or config.get("quantization_config")
    counted = _count_parameters(tensors, quant_config if isinstance(quant_config, dict) else None)
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    archs = config.get("architectures") or []
    return _Facts(
        format="mlx" if is_mlx or "quantization" in config else "safetensors",
        files=files,
        architecture=archs[0] if archs else config.get("model_type"),
        model_type=config.get("model_type"),
        parameters=counted.parameters,
        weights_bytes=sum(t.nbytes for t in tensors.values()),
        dtype=counted.dtype,
        quantization=counted.quantization,
        tensor_types=counted.types,
        context_length=_context_length(config, text),
        attention=_attention(config, text),
        chat_template=read_chat_template(folder),
        decoder=any(str(a).endswith(_DECODER_SUFFIXES) for a in archs) if archs else None,
    )


def _read_config(folder: Path) -> dict:
    path = folder / "config.json"
    if not path.is_file():
        raise ModelFormatError(
            f"{folder} has no config.json",
            hint="a model folder holds config.json next to its *.safetensors files",
        )
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ModelFormatError(f"{path} is not valid JSON: {e}") from None
    if not isinstance(config, dict):
        raise ModelFormatError(f"{path} is not a JSON object")
    return config


@dataclass
class _Counted:
    parameters: int
    dtype: str | None
    quantization: dict | None
    types: dict[str, dict]


def _count_parameters(tensors: Mapping[str, TensorInfo], quant: dict | None) -> _Counted:
    """Logical parameters: packed quantised weights count as the matrix they stand for."""
    packed = {n[: -len(".scales")] for n in tensors if n.endswith(".scales")}
    packed = {m for m in packed if f"{m}.weight" in tensors}
    types: dict[str, dict] = {}
    floats: Counter[str] = Counter()
    bits_seen: Counter[int] = Counter()
    total = 0
    for name, info in tensors.items():
        module, _, leaf = name.rpartition(".")
        if module in packed and leaf in _QUANT_OVERHEAD:
            floats[info.dtype] += prod(info.shape)
            continue
        if name.endswith(_SKIP_SUFFIXES):
            continue
        if module in packed and leaf == "weight":
            count, bits = _packed_count(module, info, tensors[f"{module}.scales"], quant)
            bits_seen[bits] += 1
            label = f"{bits}-bit"
        elif leaf == "qweight" and quant and quant.get("bits"):  # GPTQ / AWQ: [in * bits / 32, out]
            count, label = info.shape[0] * 32 // int(quant["bits"]) * prod(info.shape[1:]), "gptq"
        elif info.dtype in DTYPE_BYTES:
            count, label = prod(info.shape), info.dtype
            floats[info.dtype] += count
        else:  # integer buffers (position ids, ...) are not parameters
            continue
        total += count
        entry = types.setdefault(label, {"tensors": 0, "parameters": 0})
        entry["tensors"] += 1
        entry["parameters"] += count
    dtype = floats.most_common(1)[0][0] if floats else None
    return _Counted(total, dtype, _quant_summary(quant, bits_seen, len(packed)), types)


def _packed_count(module: str, weight: TensorInfo, scales: TensorInfo, quant: dict | None):
    """(logical parameters, bits) of an MLX packed weight (uint32 words) and its scales."""
    group_size, bits = _module_quant(quant, module)
    element_bits = _ELEMENT_BITS.get(weight.dtype, 32)
    packed_in = weight.shape[-1] * element_bits
    if group_size:
        n_in = scales.shape[-1] * group_size
    elif bits:
        n_in = packed_in // bits
    else:  # no config: MLX's default group size
        n_in = scales.shape[-1] * 64
    rows = prod(weight.shape[:-1])
    return rows * n_in, round(packed_in / n_in) if n_in else 0


def _module_quant(quant: dict | None, module: str) -> tuple[int | None, int | None]:
    if not quant:
        return None, None
    override = quant.get(module)
    if not isinstance(override, dict) and "." in module:
        override = quant.get(module.split(".", 1)[1])  # language_model.model.x -> model.x
    source = override if isinstance(override, dict) else quant
    group_size, bits = source.get("group_size"), source.get("bits")
    return (int(group_size) if group_size else None), (int(bits) if bits else None)


def _quant_summary(quant: dict | None, bits_seen: Counter[int], packed: int) -> dict | None:
    if not quant and not packed:
        return None
    quant = quant or {}
    summary = {
        "method": quant.get("quant_method") or "mlx",
        "mode": quant.get("mode", "affine") if not quant.get("quant_method") else None,
        "bits": quant.get("bits"),
        "group_size": quant.get("group_size"),
        "overrides": {
            module: {k: v for k, v in value.items() if k in ("bits", "group_size", "mode")}
            for module, value in quant.items()
            if isinstance(value, dict)
        },
        "skipped": sorted(m for m, v in quant.items() if v is False),
        "quantized_tensors": packed,
        "bits_seen": {str(b): n for b, n in sorted(bits_seen.items())},
    }
    if packed and not quant:
        summary["note"] = "no quantization in config.json; group size 64 assumed"
    return {k: v for k, v in summary.items() if v is not None}


def _context_length(config: Mapping, text: Mapping) -> int | None:
    for source in (config, text):
        for key in _CONTEXT_KEYS:
            if isinstance(source.get(key), int):
                return source[key]
    return None


def _attention(config: Mapping, text: Mapping) -> dict | None:
    def pick(*keys: str) -> int | None:
        for source in (text, config):
            for key in keys:
                if isinstance(source.get(key), int):
                    return source[key]
        return None

    layers = pick("num_hidden_layers", "n_layer", "num_layers", "n_layers")
    heads = pick("num_attention_heads", "n_head", "num_heads")
    hidden = pick("hidden_size", "n_embd", "d_model")
    if not (layers and heads):
        return None
    head_dim = pick("head_dim") or (hidden // heads if hidden else None)
    kv_heads = pick("num_key_value_heads", "num_kv_heads", "n_head_kv") or heads
    return {"layers": layers, "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim}


def read_chat_template(folder: Path) -> str | None:
    """The chat template text of a Hugging Face folder, or None."""
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8", errors="replace")
    for name in ("chat_template.json", "tokenizer_config.json"):
        try:
            data = json.loads((folder / name).read_text())
        except (OSError, ValueError):
            continue
        template = data.get("chat_template") if isinstance(data, dict) else None
        if isinstance(template, list):  # [{"name": "default", "template": ...}, ...]
            named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
            template = named.get("default") or next(iter(named.values()), None)
        if isinstance(template, str) and template.strip():
            return template
    return None


# --- GGUF -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GGUFInfo:
    metadata: dict[str, Any]  # arrays of strings come back as their length (an int)
    tensors: dict[str, tuple[str, tuple[int, ...]]]  # name -> (ggml type, logical shape)
    data_bytes: int


def read_gguf_info(path: Path) -> GGUFInfo:
    """A GGUF file's metadata and tensor table, read from its header (no tensor data)."""
    from mlxctl.models.gguf_header import GGML_TYPE_NAMES, _read_preamble, _unpack

    path = Path(path)
    with open(path, "rb") as f:
        n_tensors, n_kv = _read_preamble(f, path)
        metadata = {}
        for _ in range(n_kv):
            key = _gguf_string(f)
            (vtype,) = _unpack(f, "<I")
            metadata[key] = _gguf_value(f, vtype)
        tensors = {}
        for _ in range(n_tensors):
            name = _gguf_string(f)
            (n_dims,) = _unpack(f, "<I")
            dims = _unpack(f, f"<{n_dims}Q")
            ggml_type, _offset = _unpack(f, "<IQ")
            tensors[name] = (GGML_TYPE_NAMES.get(ggml_type, f"type {ggml_type}"), dims[::-1])
        alignment = metadata.get("general.alignment") or 32
        start = -(-f.tell() // alignment) * alignment
    return GGUFInfo(metadata, tensors, max(_size(path) - start, 0))


_GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
                 10: "<Q", 11: "<q", 12: "<d"}  # fmt: skip
_GGUF_STRING, _GGUF_ARRAY = 8, 9
_SMALL_ARRAY = 256


def _gguf_value(f: BinaryIO, vtype: int) -> Any:
    from mlxctl.models.gguf_header import _skip_value, _unpack

    if vtype in _GGUF_SCALARS:
        return _unpack(f, _GGUF_SCALARS[vtype])[0]
    if vtype == _GGUF_STRING:
        return _gguf_string(f)
    if vtype == _GGUF_ARRAY:
        item_type, count = _unpack(f, "<IQ")
        if item_type in _GGUF_SCALARS and count <= _SMALL_ARRAY:
            return list(_unpack(f, "<" + _GGUF_SCALARS[item_type][1] * count))
        f.seek(-12, 1)
        _skip_value(f, vtype)
        return count
    raise ModelFormatError(f"unknown GGUF metadata value type {vtype}")


def _gguf_string(f: BinaryIO) -> str:
    from mlxctl.models.gguf_header import _read_string

    return _read_string(f)


def _gguf_facts(path: Path) -> _Facts:
    info = read_gguf_info(path)
    meta = info.metadata
    arch = meta.get("general.architecture")
    types: dict[str, dict] = {}
    for ggml_type, shape in info.tensors.values():
        entry = types.setdefault(ggml_type, {"tensors": 0, "parameters": 0})
        entry["tensors"] += 1
        entry["parameters"] += prod(shape)

    def key(suffix: str) -> Any:
        value = meta.get(f"{arch}.{suffix}")
        return max(value) if isinstance(value, list) and value else value  # per-layer arrays

    heads, hidden = key("attention.head_count"), key("embedding_length")
    head_dim = key("attention.key_length") or (hidden // heads if heads and hidden else None)
    attention = None
    if key("block_count") and heads:
        attention = {
            "layers": key("block_count"),
            "heads": heads,
            "kv_heads": key("attention.head_count_kv") or heads,
            "head_dim": head_dim,
        }
        if (value_dim := key("attention.value_length")) and value_dim != head_dim:
            attention["value_dim"] = value_dim
    template = meta.get("tokenizer.chat_template")
    return _Facts(
        format="gguf",
        files=[path],
        architecture=arch,
        model_type=arch,
        parameters=sum(prod(shape) for _, shape in info.tensors.values()),
        weights_bytes=info.data_bytes,
        dtype="float16",  # llama.cpp's KV cache and what MLX makes of GGUF scales
        quantization=_gguf_quantization(info.tensors),
        tensor_types=types,
        context_length=key("context_length"),
        attention=attention,
        chat_template=template if isinstance(template, str) else None,
        decoder=True,
    )


def _gguf_quantization(tensors: Mapping[str, tuple[str, tuple[int, ...]]]) -> dict | None:
    quantised = {n: t for n, (t, _) in tensors.items() if not t.startswith(("F", "BF", "I"))}
    if not quantised:
        return None
    weighted: Counter[str] = Counter()
    for name, qtype in quantised.items():
        weighted[qtype] += prod(tensors[name][1])
    main = weighted.most_common(1)[0][0]
    return {
        "method": "gguf",
        "type": main,
        "bits": _ggml_bits(main),
        "group_size": 256 if main.endswith("_K") else 32,
        "overrides": {n: t for n, t in sorted(quantised.items()) if t != main},
        "quantized_tensors": len(quantised),
    }


def _ggml_bits(qtype: str) -> int | None:
    match = re.match(r"^(?:IQ|Q|TQ)(\d)", qtype)
    return int(match.group(1)) if match else None


# --- CTranslate2 ----------------------------------------------------------------------------


def _is_ct2(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError:
        return False
    return len(head) > 8 and b"Spec" in head[6:64]


def read_ct2_variables(path: Path) -> tuple[str, list[tuple[str, str, tuple[int, ...], int]]]:
    """(spec name, [(name, dtype, shape, bytes)]) of a CTranslate2 ``model.bin``."""
    try:
        with open(path, "rb") as f:
            _version, spec = _ct2_unpack(f, "<I")[0], _ct2_string(f)
            _revision, count = _ct2_unpack(f, "<II")
            variables = []
            for _ in range(count):
                name = _ct2_string(f)
                (rank,) = _ct2_unpack(f, "<B")
                shape = _ct2_unpack(f, f"<{rank}I")
                code, nbytes = _ct2_unpack(f, "<BI")
                f.seek(nbytes, 1)
                variables.append((name, _CT2_DTYPES.get(code, f"code {code}"), shape, nbytes))
    except (struct.error, UnicodeDecodeError) as e:
        raise ModelFormatError(f"{path} is not a CTranslate2 model ({e})") from None
    return spec, variables


def _ct2_unpack(f: BinaryIO, fmt: str) -> tuple:
    size = struct.calcsize(fmt)
    return struct.unpack(fmt, f.read(size))


def _ct2_string(f: BinaryIO) -> str:
    (length,) = _ct2_unpack(f, "<H")
    return f.read(length).rstrip(b"\0").decode("utf-8")


def _ct2_facts(folder: Path, model_bin: Path, files: list[Path]) -> _Facts:
    spec, variables = read_ct2_variables(model_bin)
    weights = [v for v in variables if v[2] and not v[0].endswith("_scale")]
    types: dict[str, dict] = {}
    for _, dtype, shape, _ in weights:
        entry = types.setdefault(dtype, {"tensors": 0, "parameters": 0})
        entry["tensors"] += 1
        entry["parameters"] += prod(shape)
    main = max(types, key=lambda t: types[t]["parameters"]) if types else None
    architecture = spec.removesuffix("Spec").lower() or None
    return _Facts(
        format="ctranslate2",
        files=files,
        architecture=architecture,
        model_type=architecture,
        parameters=sum(prod(shape) for _, _, shape, _ in weights),
        weights_bytes=sum(v[3] for v in variables),
        dtype=main,
        quantization={"method": "ctranslate2", "bits": 8} if main == "int8" else None,
        tensor_types=types,
        chat_template=None,
        decoder=False,
    )
