"""A reader for the header of a GGUF file: its architecture and each tensor's ggml type.

``mlx.core.load`` reads GGUF tensors but converts the types it does not support natively
(K-quants, BF16) to float16 without a word, so the types are checked here first, from the
header alone, without reading any tensor data.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from mlxctl.errors import ModelFormatError

GGML_TYPE_NAMES = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    6: "Q5_0",
    7: "Q5_1",
    8: "Q8_0",
    9: "Q8_1",
    10: "Q2_K",
    11: "Q3_K",
    12: "Q4_K",
    13: "Q5_K",
    14: "Q6_K",
    15: "Q8_K",
    16: "IQ2_XXS",
    17: "IQ2_XS",
    18: "IQ3_XXS",
    19: "IQ1_S",
    20: "IQ4_NL",
    21: "IQ3_S",
    22: "IQ2_S",
    23: "IQ4_XS",
    24: "I8",
    25: "I16",
    26: "I32",
    27: "I64",
    28: "F64",
    29: "IQ1_M",
    30: "BF16",
    34: "TQ1_0",
    35: "TQ2_0",
    39: "MXFP4",
}

# Sizes of GGUF metadata value types (uint8 ... float64); 8 = string, 9 = array.
_SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class GGUFHeader:
    architecture: str | None
    tensor_types: dict[str, str]  # tensor name -> ggml type name


def read_header(path: Path) -> GGUFHeader:
    """Read the architecture and tensor types of the GGUF file at ``path``."""
    with open(path, "rb") as f:
        n_tensors, n_kv = _read_preamble(f, path)
        architecture = _read_metadata(f, n_kv)
        types = dict(_read_tensor_info(f) for _ in range(n_tensors))
    return GGUFHeader(architecture, types)


def _read_preamble(f: BinaryIO, path: Path) -> tuple[int, int]:
    if f.read(4) != b"GGUF":
        raise ModelFormatError(f"{path} is not a GGUF file")
    (version,) = _unpack(f, "<I")
    if version < 2:
        raise ModelFormatError(f"{path} is GGUF version {version}; only versions 2 and 3 are read")
    return _unpack(f, "<QQ")


def _read_metadata(f: BinaryIO, n_kv: int) -> str | None:
    architecture = None
    for _ in range(n_kv):
        key = _read_string(f)
        (vtype,) = _unpack(f, "<I")
        if key == "general.architecture" and vtype == _STRING:
            architecture = _read_string(f)
        else:
            _skip_value(f, vtype)
    return architecture


def _read_tensor_info(f: BinaryIO) -> tuple[str, str]:
    name = _read_string(f)
    (n_dims,) = _unpack(f, "<I")
    f.seek(8 * n_dims, 1)
    (ggml_type,) = _unpack(f, "<I")
    f.seek(8, 1)  # data offset
    return name, GGML_TYPE_NAMES.get(ggml_type, f"type {ggml_type}")


def _skip_value(f: BinaryIO, vtype: int) -> None:
    if vtype == _STRING:
        _read_string(f)
    elif vtype == _ARRAY:
        item_type, count = _unpack(f, "<IQ")
        if item_type in _SCALAR_SIZES:
            f.seek(_SCALAR_SIZES[item_type] * count, 1)
        else:
            for _ in range(count):
                _skip_value(f, item_type)
    elif vtype in _SCALAR_SIZES:
        f.seek(_SCALAR_SIZES[vtype], 1)
    else:
        raise ModelFormatError(f"unknown GGUF metadata value type {vtype}")


def _read_string(f: BinaryIO) -> str:
    (length,) = _unpack(f, "<Q")
    return f.read(length).decode("utf-8", errors="replace")


def _unpack(f: BinaryIO, fmt: str) -> tuple:
    size = struct.calcsize(fmt)
    data = f.read(size)
    if len(data) != size:
        raise ModelFormatError("GGUF header is truncated")
    return struct.unpack(fmt, data)
