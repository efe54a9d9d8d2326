"""Kokoro's weights from its int8 ONNX export: dequantised, in PyTorch layouts, under the
original checkpoint's names (weight norm split again, LSTM gates reordered, the pooler zeros)."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from mlxctl.audio.kokoro_scopes import checkpoint_name, module_of
from mlxctl.audio.onnx_reader import OnnxGraph, OnnxNode
from mlxctl.errors import ModelFormatError

_GATES = (0, 2, 3, 1)  # ONNX LSTM gate blocks i, o, f, c taken in PyTorch's order i, f, g(c), o
_PLAIN_CONV = re.compile(r"(^|\.)(F0_proj|N_proj|noise_convs\.\d+)$")  # convolutions without weight norm


class _Reader:
    """Dequantises the initialisers of one graph, remembering which were used."""

    def __init__(self, graph: OnnxGraph):
        self.graph = graph
        self.inits = graph.initializers
        self.out: dict[str, np.ndarray] = {}
        self.done: dict[str, str] = {}  # weight initialiser -> module it was read for

    def first_use(self, node: OnnxNode, weight: str) -> bool:
        """False when ``weight`` was read before for this node's module (a shared layer run again)."""
        module = module_of(node.name)
        if weight in self.done:
            if self.done[weight] != module:
                raise ModelFormatError(f"the ONNX weight {weight} is shared by {self.done[weight]} and {module}")
            return False
        self.done[weight] = module
        return True

    def init(self, name: str) -> np.ndarray:
        try:
            return self.inits[name]
        except KeyError:
            raise ModelFormatError(f"the ONNX graph has no initialiser {name!r}") from None

    def optional(self, node: OnnxNode, index: int) -> np.ndarray | None:
        name = node.inputs[index] if len(node.inputs) > index else ""
        return self.init(name) if name else None

    def put(self, name: str, value: np.ndarray) -> None:
        if name in self.out:
            raise ModelFormatError(f"the ONNX graph holds two weights for {name}")
        self.out[name] = np.ascontiguousarray(value, dtype=np.float32)

    def scale_of(self, quantized: str) -> np.ndarray:
        if not quantized.endswith("_quantized"):
            raise ModelFormatError(f"the ONNX initialiser {quantized!r} is not a quantised weight")
        return self.init(quantized[: -len("_quantized")] + "_scale").astype(np.float32)

    # each kind of weight-bearing node

    def matmul_integer(self, node: OnnxNode) -> None:
        """Linear layers: (in, out) int8 weight, per-output-channel scale → PyTorch (out, in)."""
        name = node.inputs[1]
        weight = _dequantize(self.init(name), self.scale_of(name), self.optional(node, 3))
        self.put(f"{module_of(node.name)}.weight", weight.T)

    def conv_integer(self, node: OnnxNode) -> None:
        name = node.inputs[1]
        weight = _dequantize(self.init(name), self.scale_of(name), self.optional(node, 3))
        self.conv(module_of(node.name), weight)

    def float_conv(self, node: OnnxNode) -> None:
        self.conv(module_of(node.name), self.init(node.inputs[1]).astype(np.float32))

    def conv(self, module: str, weight: np.ndarray) -> None:
        """A kernel in PyTorch layout; weight-normalised modules get it back as v and g."""
        if weight.ndim != 3:
            raise ModelFormatError(f"{module}: a 1-D convolution kernel has 3 axes, this one {weight.ndim}")
        if _PLAIN_CONV.search(module):
            self.put(f"{module}.weight", weight)
            return
        self.put(f"{module}.weight_v", weight)
        self.put(f"{module}.weight_g", np.sqrt(np.sum(np.square(weight, dtype=np.float64), axis=(1, 2),
                                                      keepdims=True)))

    def float_matmul(self, node: OnnxNode) -> None:
        self.put(f"{module_of(node.name)}.weight", self.init(node.inputs[1]).astype(np.float32).T)

    def gather(self, node: OnnxNode) -> None:
        """A quantised embedding: the rows it gathers are dequantised by the next node."""
        after = [n for n in self.graph.consumers(node.outputs[0]) if n.op == "DequantizeLinear"]
        if len(after) != 1:
            raise ModelFormatError(f"the quantised embedding {node.name} has no DequantizeLinear after it")
        scale = self.init(after[0].inputs[1]).astype(np.float32)
        weight = _dequantize(self.init(node.inputs[0]), scale, self.optional(after[0], 2))
        self.put(f"{module_of(node.name)}.weight", weight)

    def lstm(self, node: OnnxNode) -> None:
        """A bidirectional DynamicQuantizeLSTM: W (dirs, in, 4h), R (dirs, h, 4h), B (dirs, 8h)."""
        module = module_of(node.name)
        direction = node.attrs.get("direction", b"forward")
        hidden = int(node.attrs.get("hidden_size", 0))
        w, r, b = (self.init(node.inputs[i]) for i in (1, 2, 3))
        scales = [self.init(node.inputs[i]).astype(np.float32) for i in (8, 10)]
        zeros = [self.optional(node, i) for i in (9, 11)]
        dirs = w.shape[0]
        if direction != b"bidirectional" or dirs != 2 or w.shape[2] != 4 * hidden or b.shape != (2, 8 * hidden):
            raise ModelFormatError(f"{module}: expected a bidirectional LSTM of hidden size {hidden}")
        for d, suffix in enumerate(("", "_reverse")):
            per = [(s[d] if s.ndim else s) for s in scales]
            zp = [(z[d] if z is not None and z.ndim else z) for z in zeros]
            self.put(f"{module}.weight_ih_l0{suffix}", _gates(_dequantize(w[d], per[0], zp[0]).T, hidden))
            self.put(f"{module}.weight_hh_l0{suffix}", _gates(_dequantize(r[d], per[1], zp[1]).T, hidden))
            self.put(f"{module}.bias_ih_l0{suffix}", _gates(b[d, : 4 * hidden], hidden))
            self.put(f"{module}.bias_hh_l0{suffix}", _gates(b[d, 4 * hidden :], hidden))


def _dequantize(q: np.ndarray, scale: np.ndarray, zero: np.ndarray | None) -> np.ndarray:
    """``(q - zero) * scale``; per-channel scales and zero points run along the last axis."""
    values = q.astype(np.float32)
    if zero is not None:
        values -= zero.astype(np.float32)
    return values * scale.astype(np.float32)


def _gates(rows: np.ndarray, hidden: int) -> np.ndarray:
    blocks = np.split(np.asarray(rows, dtype=np.float32), 4, axis=0)
    if blocks[0].shape[0] != hidden:
        raise ModelFormatError(f"an LSTM gate has {blocks[0].shape[0]} rows, not {hidden}")
    return np.concatenate([blocks[i] for i in _GATES], axis=0)


def _weight_reader(reader: _Reader, node: OnnxNode) -> Callable[[OnnxNode], None] | None:
    """How to read the weight ``node`` carries (None: it carries none, or one read already)."""
    inits = reader.inits
    weight = node.inputs[1] if len(node.inputs) > 1 else ""
    if node.op == "MatMulInteger" and weight in inits:
        read = reader.matmul_integer
    elif node.op == "ConvInteger" and weight in inits:
        read = reader.conv_integer
    elif node.op == "DynamicQuantizeLSTM" and weight in inits:
        read = reader.lstm
    elif node.op == "Gather" and node.inputs and node.inputs[0].endswith("_quantized") and node.inputs[0] in inits:
        read, weight = reader.gather, node.inputs[0]
    elif node.op in ("Conv", "ConvTranspose") and weight in inits and "stft" not in node.name:
        read = reader.float_conv  # the iSTFT's fixed bases are no parameters: mlx-audio builds its own
    elif node.op == "MatMul" and weight in inits and inits[weight].dtype == np.float32:
        read = reader.float_matmul
    else:
        return None
    return read if reader.first_use(node, weight) else None


def kokoro_weights(graph: OnnxGraph) -> dict[str, np.ndarray]:
    """Kokoro's weights under the original PyTorch checkpoint's names (float32, PyTorch layouts)."""
    reader = _Reader(graph)
    inits = graph.initializers
    for node in graph.nodes:
        read = _weight_reader(reader, node)
        if read is not None:
            read(node)
        elif node.op == "LSTM":
            raise ModelFormatError("this ONNX file has a float LSTM: only the int8 kokoro-onnx export is known")
    for name, value in inits.items():
        if (key := checkpoint_name(name)) is not None:
            reader.put(key, value.astype(np.float32))
    out = reader.out
    if "bert.encoder.embedding_hidden_mapping_in.weight" not in out or "decoder.generator.conv_post.weight_v" not in out:
        raise ModelFormatError("this ONNX file is not a Kokoro model")
    hidden = out["bert.encoder.embedding_hidden_mapping_in.weight"].shape[0]
    out.setdefault("bert.pooler.weight", np.zeros((hidden, hidden), np.float32))  # unused by Kokoro
    out.setdefault("bert.pooler.bias", np.zeros((hidden,), np.float32))
    return out
