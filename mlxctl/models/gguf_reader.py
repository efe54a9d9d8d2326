"""Read a whole GGUF file ourselves: its metadata, its tensor table, and each tensor's raw bytes.

``mlx.core.load`` turns the block types it does not know (K-quants, Q5_0, Q5_1) into float16
without a word, so mlxctl reads the blocks itself (:mod:`mlxctl.models.gguf_decode`). Metadata
values come back as Python scalars, strings and lists of strings; numeric arrays as numpy arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from mlxctl.errors import ModelFormatError
from mlxctl.models.gguf_header import (
    _ARRAY,
    _STRING,
    GGML_TYPE_NAMES,
    _read_preamble,
    _read_string,
    _unpack,
)

_SCALARS = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "?",
            10: "<u8", 11: "<i8", 12: "<f8"}  # fmt: skip
_DEFAULT_ALIGNMENT = 32


@dataclass(frozen=True)
class TensorInfo:
    name: str
    kind: str  # ggml type name (Q4_K, F32, ...)
    shape: tuple[int, ...]  # numpy order: the last dimension is GGUF's ne[0]
    offset: int  # absolute position of the tensor's first byte in the file


@dataclass(frozen=True)
class GGUFFile:
    path: Path
    metadata: dict[str, Any]
    tensors: list[TensorInfo]


def read_gguf(path: Path) -> GGUFFile:
    """Parse the header of the GGUF file at ``path`` (tensor data is read later, on demand)."""
    path = Path(path)
    with open(path, "rb") as f:
        n_tensors, n_kv = _read_preamble(f, path)
        metadata = {}
        for _ in range(n_kv):
            key = _read_string(f)
            (vtype,) = _unpack(f, "<I")
            metadata[key] = _read_value(f, vtype)
        table = [_read_tensor_entry(f) for _ in range(n_tensors)]
        alignment = int(metadata.get("general.alignment", _DEFAULT_ALIGNMENT))
        start = -(-f.tell() // alignment) * alignment
    tensors = [TensorInfo(name, kind, shape, start + offset) for name, kind, shape, offset in table]
    return GGUFFile(path, metadata, tensors)


def tensor_bytes(gguf: GGUFFile, info: TensorInfo, nbytes: int) -> np.ndarray:
    """The ``nbytes`` raw bytes of ``info`` as a read-only uint8 array mapped from the file."""
    if info.offset + nbytes > gguf.path.stat().st_size:
        raise ModelFormatError(f"{gguf.path.name}: tensor {info.name!r} runs past the file's end")
    return np.memmap(gguf.path, dtype=np.uint8, mode="r", offset=info.offset, shape=(nbytes,))


def element_count(info: TensorInfo) -> int:
    return prod(info.shape)


def _read_value(f: BinaryIO, vtype: int) -> Any:
    if vtype in _SCALARS:
        dtype = np.dtype(_SCALARS[vtype])
        value = np.frombuffer(_exact(f, dtype.itemsize), dtype)[0]
        return float(str(value)) if vtype == 6 else value.item()  # 1e-05, not 9.9999997e-06
    if vtype == _STRING:
        return _read_string(f)
    if vtype == _ARRAY:
        item_type, count = _unpack(f, "<IQ")
        if item_type in _SCALARS:
            dtype = np.dtype(_SCALARS[item_type])
            return np.frombuffer(_exact(f, dtype.itemsize * count), dtype).copy()
        return [_read_value(f, item_type) for _ in range(count)]
    raise ModelFormatError(f"unknown GGUF metadata value type {vtype}")


def _read_tensor_entry(f: BinaryIO) -> tuple[str, str, tuple[int, ...], int]:
    name = _read_string(f)
    (n_dims,) = _unpack(f, "<I")
    dims = _unpack(f, f"<{n_dims}Q")
    ggml_type, offset = _unpack(f, "<IQ")
    return name, GGML_TYPE_NAMES.get(ggml_type, f"type {ggml_type}"), tuple(reversed(dims)), offset


def _exact(f: BinaryIO, size: int) -> bytes:
    data = f.read(size)
    if len(data) != size:
        raise ModelFormatError("GGUF header is truncated")
    return data
