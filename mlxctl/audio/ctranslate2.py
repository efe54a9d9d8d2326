"""Read a CTranslate2 ``model.bin`` (what faster-whisper ships) into NumPy arrays.

The file is little-endian:

- ``uint32`` binary version (4 and later are read here), then for version 2+ the spec name
  (a string) and ``uint32`` spec revision;
- ``uint32`` number of variables, each: name (string), ``uint8`` rank, ``uint32`` per dimension,
  ``uint8`` dtype code, ``uint32`` byte count, the raw data;
- for version 3+: ``uint32`` number of aliases, each a pair of strings (alias, target).

A string is a ``uint16`` byte count followed by UTF-8 bytes ending in a NUL. Quantized
variables (int8, int16) come with a float ``<name>_scale`` (one per row, or one for all):
the real value is ``q / scale``. :func:`read_model` returns the raw variables;
:func:`dequantized` folds the scales in.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mlxctl.errors import ModelFormatError

_FLOAT32, _INT8, _INT16, _INT32, _FLOAT16, _BFLOAT16 = range(6)
_DTYPES = {
    _FLOAT32: np.dtype("<f4"),
    _INT8: np.dtype("i1"),
    _INT16: np.dtype("<i2"),
    _INT32: np.dtype("<i4"),
    _FLOAT16: np.dtype("<f2"),
    _BFLOAT16: np.dtype("<u2"),  # widened to float32 on read: NumPy has no bfloat16
}
MIN_VERSION = 4  # dtype codes per variable; older files (CTranslate2 1.x) are not read


@dataclass
class Ct2Model:
    """A CTranslate2 model file: its spec, and variables by name (aliases resolved)."""

    spec: str
    revision: int
    version: int
    variables: dict[str, np.ndarray]
    aliases: dict[str, str] = field(default_factory=dict)

    def scalar(self, name: str, default: int | None = None) -> int | None:
        value = self.variables.get(name)
        return default if value is None or value.size != 1 else int(value.reshape(()))


class _Reader:
    def __init__(self, buffer: mmap.mmap | bytes, path: Path):
        self.buffer, self.path, self.pos = buffer, path, 0

    def take(self, n: int) -> memoryview:
        if self.pos + n > len(self.buffer):
            raise ModelFormatError(f"{self.path} is truncated (a CTranslate2 model.bin ends early)")
        view = memoryview(self.buffer)[self.pos : self.pos + n]
        self.pos += n
        return view

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        return struct.unpack("<H", self.take(2))[0]

    def u32(self) -> int:
        return struct.unpack("<I", self.take(4))[0]

    def string(self) -> str:
        raw = bytes(self.take(self.u16()))
        try:
            return raw.rstrip(b"\0").decode("utf-8")
        except UnicodeDecodeError:
            raise ModelFormatError(f"{self.path}: a variable name is not UTF-8") from None


def read_model(path: Path) -> Ct2Model:
    """All variables of the CTranslate2 model at ``path`` (a model.bin or its folder).

    Arrays are read-only views of a memory map of the file (no copy of the weights).
    """
    path = Path(path)
    if path.is_dir():
        path = path / "model.bin"
    try:
        with open(path, "rb") as f:
            buffer = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except FileNotFoundError:
        raise ModelFormatError(f"{path} does not exist") from None
    except (OSError, ValueError) as exc:  # ValueError: an empty file cannot be mapped
        raise ModelFormatError(f"cannot read {path}: {exc}") from None
    return _parse(_Reader(buffer, path))


def _parse(r: _Reader) -> Ct2Model:
    version = r.u32()
    if version < MIN_VERSION or version > 64:
        raise ModelFormatError(
            f"{r.path} is not a CTranslate2 model this version reads (binary version {version})",
            hint="re-convert it with CTranslate2 3.x or 4.x (ct2-transformers-converter)",
        )
    spec, revision = r.string(), r.u32()
    variables: dict[str, np.ndarray] = {}
    for _ in range(r.u32()):
        name = r.string()
        rank = r.u8()
        shape = tuple(r.u32() for _ in range(rank))
        code, nbytes = r.u8(), r.u32()
        dtype = _DTYPES.get(code)
        if dtype is None:
            raise ModelFormatError(f"{r.path}: variable {name} has an unknown dtype code {code}")
        count = int(np.prod(shape, dtype=np.int64))
        if count * dtype.itemsize != nbytes:
            raise ModelFormatError(
                f"{r.path}: variable {name} holds {nbytes} bytes, its shape {shape} needs "
                f"{count * dtype.itemsize}"
            )
        offset = r.pos
        r.take(nbytes)
        array = np.frombuffer(r.buffer, dtype=dtype, count=count, offset=offset).reshape(shape)
        if code == _BFLOAT16:
            array = (array.astype(np.uint32) << 16).view(np.float32)
        variables[name] = array
    aliases = {}
    if version >= 3 and r.pos < len(r.buffer):
        for _ in range(r.u32()):
            alias, target = r.string(), r.string()
            aliases[alias] = target
    for alias, target in aliases.items():
        if target in variables:
            variables.setdefault(alias, variables[target])
    return Ct2Model(spec=spec, revision=revision, version=version, variables=variables, aliases=aliases)


def dequantized(variables: Mapping[str, np.ndarray], name: str) -> np.ndarray:
    """Variable ``name`` as floats: int8/int16 divided by its ``_scale``, floats as stored."""
    value = variables[name]
    if value.dtype.kind == "f":
        return value
    scale = variables.get(f"{name}_scale")
    if scale is None:
        raise ModelFormatError(f"quantized variable {name} has no {name}_scale")
    scale = np.asarray(scale, dtype=np.float32)
    if scale.size > 1:  # one scale per output row
        scale = scale.reshape((-1,) + (1,) * (value.ndim - 1))
    return value.astype(np.float32) / scale


def write_model(path: Path, spec: str, variables: Mapping[str, np.ndarray], *, revision: int = 3,
                aliases: Mapping[str, str] | None = None) -> None:
    """Write a CTranslate2 model file (binary version 6): for tests and tools, not for speed."""
    codes = {("f", 4): _FLOAT32, ("i", 1): _INT8, ("i", 2): _INT16, ("i", 4): _INT32, ("f", 2): _FLOAT16}

    def string(text: str) -> bytes:
        raw = text.encode("utf-8") + b"\0"
        return struct.pack("<H", len(raw)) + raw

    with open(path, "wb") as f:
        f.write(struct.pack("<I", 6) + string(spec) + struct.pack("<I", revision))
        f.write(struct.pack("<I", len(variables)))
        for name, value in variables.items():
            value = np.asarray(value)  # (ascontiguousarray would make a scalar 1-d)
            f.write(string(name) + struct.pack("<B", value.ndim))
            f.write(struct.pack(f"<{value.ndim}I", *value.shape))
            code = codes[(value.dtype.kind, value.dtype.itemsize)]
            f.write(struct.pack("<BI", code, value.nbytes))
            f.write(value.astype(value.dtype.newbyteorder("<"), copy=False).tobytes())
        aliases = dict(aliases or {})
        f.write(struct.pack("<I", len(aliases)))
        f.writelines(string(alias) + string(target) for alias, target in aliases.items())
