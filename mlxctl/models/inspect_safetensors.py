"""Safetensors headers (an 8-byte little-endian length, then a JSON table) and what they say."""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mlxctl.errors import ModelFormatError
from mlxctl.models.inspect_config import (
    _attention,
    _context_length,
    _read_config,
    read_chat_template,
)
from mlxctl.models.inspect_facts import _Facts, _size
from mlxctl.models.inspect_params import _count_parameters

_SAFETENSORS_DTYPES = {
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
    "F8_E4M3": "float8", "F8_E5M2": "float8", "I64": "int64", "I32": "int32", "I16": "int16",
    "I8": "int8", "U64": "uint64", "U32": "uint32", "U16": "uint16", "U8": "uint8", "BOOL": "bool",
}  # fmt: skip
_MAX_SAFETENSORS_HEADER = 100 << 20
_DECODER_SUFFIXES = ("ForCausalLM", "ForConditionalGeneration", "LMHeadModel")


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


def _safetensors_files(folder: Path, files: list[Path]) -> list[Path]:
    found = [p for p in files if p.suffix == ".safetensors" and p.parent == folder]
    preferred = [p for p in found if p.name.startswith("model")]
    return preferred or found


def _read_headers(weights: list[Path]) -> tuple[dict[str, TensorInfo], bool]:
    """The tensors of all ``weights`` files, and whether any says it was written by MLX."""
    tensors: dict[str, TensorInfo] = {}
    is_mlx = False
    for path in weights:
        found, metadata = read_safetensors_header(path)
        tensors.update(found)
        is_mlx = is_mlx or metadata.get("format") == "mlx"
    return tensors, is_mlx


def _safetensors_facts(folder: Path, weights: list[Path], files: list[Path]) -> _Facts:
    config = _read_config(folder)
    tensors, is_mlx = _read_headers(weights)
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
