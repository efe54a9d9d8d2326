"""The protobuf wire format, read: the fields of a message and its scalar encodings (enough for
ONNX files, without the ``protobuf`` or ``onnx`` packages)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mlxctl.errors import ModelFormatError


def varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        try:
            byte = buf[pos]
        except IndexError:
            raise ModelFormatError("the ONNX file is truncated") from None
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def fields(buf: memoryview) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of a protobuf message: ints for varints, views otherwise."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(buf, pos)
        elif wire == 2:
            size, pos = varint(buf, pos)
            value, pos = buf[pos : pos + size], pos + size
        elif wire == 1:
            value, pos = buf[pos : pos + 8], pos + 8
        elif wire == 5:
            value, pos = buf[pos : pos + 4], pos + 4
        else:
            raise ModelFormatError(f"the ONNX file has a protobuf field of wire type {wire}")
        if pos > end:
            raise ModelFormatError("the ONNX file is truncated")
        yield number, wire, value


def signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def int64s(wire: int, value: Any) -> list[int]:
    """A repeated int64 field, packed (a view) or not (an int)."""
    if wire == 0:
        return [signed(value)]
    out, pos = [], 0
    while pos < len(value):
        item, pos = varint(value, pos)
        out.append(signed(item))
    return out


def text(value: memoryview) -> str:
    return bytes(value).decode("utf-8", errors="replace")
