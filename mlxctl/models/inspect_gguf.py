"""A GGUF file's metadata and tensor table, read from its header, and what they say."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from math import prod
from pathlib import Path
from typing import Any, BinaryIO

from mlxctl.errors import ModelFormatError
from mlxctl.models.gguf_file_type import file_type_name
from mlxctl.models.inspect_facts import _Facts, _size, _tally

_GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
                 10: "<Q", 11: "<q", 12: "<d"}  # fmt: skip
_GGUF_STRING, _GGUF_ARRAY = 8, 9
_SMALL_ARRAY = 256
# every n-th layer attends to the whole context, the others to a window (llama.cpp hard-codes n)
_GLOBAL_LAYER_EVERY = {"gemma2": 2, "gemma3": 6}


@dataclass(frozen=True)
class GGUFInfo:
    metadata: dict[str, Any]  # arrays of strings come back as their length (an int)
    tensors: dict[str, tuple[str, tuple[int, ...]]]  # name -> (ggml type, logical shape)
    data_bytes: int


def read_gguf_info(path: Path) -> GGUFInfo:
    """A GGUF file's metadata and tensor table, read from its header (no tensor data)."""
    from mlxctl.models.gguf_header import _read_preamble

    path = Path(path)
    with open(path, "rb") as f:
        n_tensors, n_kv = _read_preamble(f, path)
        metadata = _read_metadata(f, n_kv)
        tensors = _read_tensor_table(f, n_tensors)
        alignment = metadata.get("general.alignment") or 32
        start = -(-f.tell() // alignment) * alignment
    return GGUFInfo(metadata, tensors, max(_size(path) - start, 0))


def _read_metadata(f: BinaryIO, n_kv: int) -> dict[str, Any]:
    from mlxctl.models.gguf_header import _unpack

    metadata = {}
    for _ in range(n_kv):
        key = _gguf_string(f)
        (vtype,) = _unpack(f, "<I")
        metadata[key] = _gguf_value(f, vtype)
    return metadata


def _read_tensor_table(f: BinaryIO, n_tensors: int) -> dict[str, tuple[str, tuple[int, ...]]]:
    from mlxctl.models.gguf_header import GGML_TYPE_NAMES, _unpack

    tensors = {}
    for _ in range(n_tensors):
        name = _gguf_string(f)
        (n_dims,) = _unpack(f, "<I")
        dims = _unpack(f, f"<{n_dims}Q")
        ggml_type, _offset = _unpack(f, "<IQ")
        tensors[name] = (GGML_TYPE_NAMES.get(ggml_type, f"type {ggml_type}"), dims[::-1])
    return tensors


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
        _tally(types, ggml_type, prod(shape))
    key = partial(_arch_value, meta, arch)
    template = meta.get("tokenizer.chat_template")
    return _Facts(
        format="gguf",
        files=[path],
        architecture=arch,
        model_type=arch,
        parameters=sum(prod(shape) for _, shape in info.tensors.values()),
        weights_bytes=info.data_bytes,
        dtype=gguf_run_dtype(info.tensors),
        quantization=_gguf_quantization(info.tensors, meta.get("general.file_type")),
        tensor_types=types,
        context_length=key("context_length"),
        attention=_gguf_attention(key, arch),
        chat_template=template if isinstance(template, str) else None,
        decoder=True,
    )


def gguf_run_dtype(tensors: Mapping[str, tuple[str, tuple[int, ...]]]) -> str:
    """The dtype an imported GGUF computes (and caches keys/values) in, as MLX promotes: K-quant
    scales and F32 tensors (llama.cpp keeps norms F32) import as float32, the 32-value block
    types' scales as float16, F16/BF16 as they are; float16 with bfloat16 is float32 too."""
    dtypes = {_imported_dtype(ggml_type) for ggml_type, _ in tensors.values()}
    if "float32" in dtypes or {"float16", "bfloat16"} <= dtypes or not dtypes:
        return "float32"
    return dtypes.pop()


def _imported_dtype(ggml_type: str) -> str:
    if ggml_type == "F32" or ggml_type.endswith("_K"):
        return "float32"
    return "bfloat16" if ggml_type == "BF16" else "float16"


def _arch_value(meta: Mapping[str, Any], arch: Any, suffix: str) -> Any:
    """The ``{arch}.{suffix}`` metadata value; the largest, for per-layer arrays."""
    value = meta.get(f"{arch}.{suffix}")
    return max(value) if isinstance(value, list) and value else value  # per-layer arrays


def _gguf_attention(key: Callable[[str], Any], arch: Any = None) -> dict | None:
    heads, hidden = key("attention.head_count"), key("embedding_length")
    head_dim = key("attention.key_length") or (hidden // heads if heads and hidden else None)
    if not (key("block_count") and heads):
        return None
    attention = {
        "layers": key("block_count"),
        "heads": heads,
        "kv_heads": key("attention.head_count_kv") or heads,
        "head_dim": head_dim,
    }
    if (value_dim := key("attention.value_length")) and value_dim != head_dim:
        attention["value_dim"] = value_dim
    if (window := key("attention.sliding_window")) and arch in _GLOBAL_LAYER_EVERY:
        layers = attention["layers"]
        attention["sliding_window"] = window
        attention["sliding_layers"] = layers - layers // _GLOBAL_LAYER_EVERY[arch]
    return attention


def _gguf_quantization(
    tensors: Mapping[str, tuple[str, tuple[int, ...]]], file_type: Any = None
) -> dict | None:
    quantised = {n: t for n, (t, _) in tensors.items() if not _is_plain(t)}
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
        "file_type": file_type_name(file_type),
    }


def _is_plain(ggml_type: str) -> bool:
    """Float and integer tensors (F32, BF16, I8, ...), not IQ* quants."""
    return ggml_type.startswith(("F", "BF")) or re.fullmatch(r"I\d+", ggml_type) is not None


def _ggml_bits(qtype: str) -> int | None:
    match = re.match(r"^(?:IQ|Q|TQ)(\d)", qtype)
    return int(match.group(1)) if match else None
