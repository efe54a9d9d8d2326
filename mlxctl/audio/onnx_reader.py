"""A minimal ONNX reader (no ``onnx`` package: :mod:`protobuf_wire` reads the bytes): the main
graph's nodes and initialisers, which are numpy views of the file."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mlxctl.audio.protobuf_wire import fields, int64s, signed, text
from mlxctl.errors import ModelFormatError

# TensorProto.DataType codes this reader understands
_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
           9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64}


@dataclass
class OnnxNode:
    name: str
    op: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class OnnxGraph:
    nodes: list[OnnxNode]
    initializers: dict[str, np.ndarray]
    producer: str = ""

    def consumers(self, output: str) -> list[OnnxNode]:
        return [n for n in self.nodes if output in n.inputs]


def _tensor(buf: memoryview) -> tuple[str, np.ndarray]:
    dims: list[int] = []
    dtype, name, raw = 0, "", None
    floats: list[np.ndarray] = []
    ints: list[int] = []
    for number, wire, value in fields(buf):
        if number == 1:
            dims += int64s(wire, value)
        elif number == 2:
            dtype = value
        elif number == 8:
            name = text(value)
        elif number == 9:
            raw = value
        elif number == 4:
            floats.append(np.frombuffer(value, "<f4") if wire == 2 else np.frombuffer(value, "<f4", count=1))
        elif number in (5, 7):  # int32_data, int64_data
            ints += int64s(wire, value)
        elif number == 14 and value == 1:
            raise ModelFormatError(f"ONNX tensor {name or '?'} keeps its data in an external file")
    if dtype not in _DTYPES:
        raise ModelFormatError(f"ONNX tensor {name or '?'} has data type {dtype}, which this reader does not know")
    np_type = np.dtype(_DTYPES[dtype]).newbyteorder("<")
    if raw is not None:
        array = np.frombuffer(raw, np_type)
    elif floats:
        array = np.concatenate(floats).astype(np_type)
    else:
        array = np.array(ints, dtype=np.int64).astype(np_type)
    size = int(np.prod(dims)) if dims else 1
    if array.size != size:
        raise ModelFormatError(f"ONNX tensor {name or '?'} holds {array.size} values for shape {tuple(dims)}")
    return name, array.reshape(dims)


def _attribute(buf: memoryview) -> tuple[str, Any]:
    name, value = "", None
    ints: list[int] = []
    for number, wire, item in fields(buf):
        if number == 1:
            name = text(item)
        elif number == 2:
            value = float(np.frombuffer(item, "<f4")[0])
        elif number == 3:
            value = signed(item)
        elif number == 4:
            value = bytes(item)
        elif number == 5:
            value = _tensor(item)[1]
        elif number == 8:
            ints += int64s(wire, item)
    return name, ints if ints else value


def _node(buf: memoryview) -> OnnxNode:
    node = OnnxNode("", "", [], [])
    for number, _wire, value in fields(buf):
        if number == 1:
            node.inputs.append(text(value))
        elif number == 2:
            node.outputs.append(text(value))
        elif number == 3:
            node.name = text(value)
        elif number == 4:
            node.op = text(value)
        elif number == 5:
            key, item = _attribute(value)
            node.attrs[key] = item
    return node


def read_onnx(path: Path) -> OnnxGraph:
    """The main graph of the ONNX file at ``path``: its nodes and initialisers (views of the file)."""
    try:
        data = memoryview(Path(path).read_bytes())
    except OSError as exc:
        raise ModelFormatError(f"cannot read {path}: {exc.strerror or exc}") from None
    graph, producer = None, ""
    for number, wire, value in fields(data):
        if number == 7 and wire == 2:
            graph = value
        elif number == 2 and wire == 2:
            producer = text(value)
    if graph is None:
        raise ModelFormatError(f"{path} is not an ONNX model (no graph)")
    nodes, inits = [], {}
    for number, wire, value in fields(graph):
        if number == 1 and wire == 2:
            nodes.append(_node(value))
        elif number == 5 and wire == 2:
            name, array = _tensor(value)
            inits[name] = array
    if not nodes:
        raise ModelFormatError(f"{path} is not an ONNX model (its graph has no nodes)")
    return OnnxGraph(nodes, inits, producer)
