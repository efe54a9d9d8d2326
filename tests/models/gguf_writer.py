"""A GGUF v3 writer of the tests' own (``mx.save_gguf`` writes float tensors only).

Tensors are given as raw bytes, so the tests pack quantised blocks themselves; the layout follows
the GGUF spec: header, metadata, tensor table, then each tensor's data at 32-byte alignment.
"""

from __future__ import annotations

import struct
from pathlib import Path

import mlx.core as mx
import numpy as np

ALIGNMENT = 32
GGML_TYPES = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q5_0": 6, "Q5_1": 7, "Q8_0": 8,
              "Q2_K": 10, "Q3_K": 11, "Q4_K": 12, "Q5_K": 13, "Q6_K": 14, "BF16": 30}

_SCALAR = {mx.uint8: (0, "B"), mx.int8: (1, "b"), mx.uint16: (2, "H"), mx.int16: (3, "h"),
           mx.uint32: (4, "I"), mx.int32: (5, "i"), mx.float32: (6, "f"), mx.bool_: (7, "?"),
           mx.uint64: (10, "Q"), mx.int64: (11, "q")}


def _string(s: str) -> bytes:
    raw = s.encode("utf-8")
    return struct.pack("<Q", len(raw)) + raw


def _value(v) -> bytes:
    """A metadata value: type tag and payload."""
    if isinstance(v, str):
        return struct.pack("<I", 8) + _string(v)
    if isinstance(v, list):  # of strings
        assert all(isinstance(s, str) for s in v)
        return struct.pack("<IIQ", 9, 8, len(v)) + b"".join(_string(s) for s in v)
    tag, fmt = _SCALAR[v.dtype]
    values = np.array(v).reshape(-1).tolist()
    if v.ndim == 0:
        return struct.pack(f"<I{fmt}", tag, values[0])
    return struct.pack(f"<IIQ{len(values)}{fmt}", 9, tag, len(values), *values)


def _pad(n: int) -> int:
    return -n % ALIGNMENT


def write_gguf(path: Path, metadata: dict, tensors: list[tuple[str, tuple[int, ...], str, bytes]]) -> None:
    """``tensors``: (name, numpy-order shape, ggml type name, data bytes)."""
    out = [b"GGUF", struct.pack("<IQQ", 3, len(tensors), len(metadata))]
    out += [_string(k) + _value(v) for k, v in metadata.items()]
    offset = 0
    for name, shape, kind, data in tensors:
        dims = tuple(reversed(shape))  # ne[0] is the innermost (fastest varying) dimension
        out.append(_string(name) + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, GGML_TYPES[kind], offset))
        offset += len(data) + _pad(len(data))
    header = b"".join(out)
    body = [header, b"\0" * _pad(len(header))]
    for _, _, _, data in tensors:
        body += [data, b"\0" * _pad(len(data))]
    path.write_bytes(b"".join(body))
