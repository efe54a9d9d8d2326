"""Kokoro-82M from kokoro-onnx's int8 ONNX file to an mlx-audio Kokoro folder.

The catalog model ``kokoro-82m`` ships ``kokoro-v1.0.int8.onnx``: Kokoro exported to ONNX,
optimised by onnxruntime and dynamically quantised. This module reads that file with a small
protobuf reader of its own (no ``onnx`` package) and rebuilds the weights of the original
PyTorch checkpoint, under its names, so that mlx-audio's ``Model.sanitize()`` takes them as it
takes the original:

- most weights are anonymous initialisers feeding ``MatMulInteger``, ``ConvInteger``,
  ``DynamicQuantizeLSTM`` and quantised ``Gather`` nodes; the module a weight belongs to is read
  from the node's scope (``/encoder/F0.0/conv1/Conv_quant`` is ``predictor.F0.0.conv1``);
  biases, norms and Snake ``alpha`` keep their names (``encoder.X`` is ``X``,
  ``decoder.decoder.X`` is ``decoder.X``);
- int8/uint8 values are dequantised as ``(q - zero_point) * scale`` (per output channel for
  linear layers, per tensor for convolutions, per direction for LSTMs);
- the exporter folded weight normalisation into plain kernels: they are split again into
  ``weight_v`` (the kernel) and ``weight_g`` (its norm per output channel), which mlx-audio
  multiplies back together;
- ONNX LSTM gates come in the order i, o, f, c; PyTorch's are i, f, g, o: rows are reordered,
  and the packed bias is split into ``bias_ih`` and ``bias_hh``;
- ``bert.pooler`` is not in the export (Kokoro never uses its output): it is written as zeros
  so that the folder loads with ``strict=True``.

The folder holds ``weights.safetensors`` (float32), ``config.json`` (mlx-audio's Kokoro config,
``model_type: kokoro``, the phoneme vocabulary under ``vocab``, dimensions read from the
weights), ``vocab.json`` and ``voices/<name>.safetensors`` (each a ``voice`` tensor of
510 x 1 x 256 style vectors, one per phoneme count) from the shipped ``voices_*.npz``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mlxctl.errors import ModelFormatError

RECIPE = "onnx-kokoro"
WEIGHTS = "weights.safetensors"
SAMPLE_RATE = 24000
VOICE_ROWS = 510  # a voice pack has one style vector per phoneme count 1..510
_GATES = (0, 2, 3, 1)  # ONNX LSTM gate blocks i, o, f, c taken in PyTorch's order i, f, g(c), o
_TOP = ("bert", "bert_encoder", "predictor", "text_encoder", "decoder")
_PLAIN_CONV = re.compile(r"(^|\.)(F0_proj|N_proj|noise_convs\.\d+)$")  # convolutions without weight norm
_REPEAT = re.compile(r"_\d+$")  # torch.onnx numbers the scopes of a module run more than once
_NAMED = re.compile(r"^(encoder|decoder\.decoder)\.([\w.]+)$")
_QUANT_PARTS = ("_quantized", "_scale", "_zero_point", "_reshape_shape")

Progress = Callable[[str], None] | None


# --- ONNX: a minimal protobuf reader --------------------------------------------------------

# TensorProto.DataType codes this reader understands
_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
           9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64}


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
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


def _fields(buf: memoryview) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of a protobuf message: ints for varints, views otherwise."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            size, pos = _varint(buf, pos)
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


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _ints(wire: int, value: Any) -> list[int]:
    """A repeated int64 field, packed (a view) or not (an int)."""
    if wire == 0:
        return [_signed(value)]
    out, pos = [], 0
    while pos < len(value):
        item, pos = _varint(value, pos)
        out.append(_signed(item))
    return out


def _text(value: memoryview) -> str:
    return bytes(value).decode("utf-8", errors="replace")


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
    for number, wire, value in _fields(buf):
        if number == 1:
            dims += _ints(wire, value)
        elif number == 2:
            dtype = value
        elif number == 8:
            name = _text(value)
        elif number == 9:
            raw = value
        elif number == 4:
            floats.append(np.frombuffer(value, "<f4") if wire == 2 else np.frombuffer(value, "<f4", count=1))
        elif number in (5, 7):  # int32_data, int64_data
            ints += _ints(wire, value)
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
    for number, wire, item in _fields(buf):
        if number == 1:
            name = _text(item)
        elif number == 2:
            value = float(np.frombuffer(item, "<f4")[0])
        elif number == 3:
            value = _signed(item)
        elif number == 4:
            value = bytes(item)
        elif number == 5:
            value = _tensor(item)[1]
        elif number == 8:
            ints += _ints(wire, item)
    return name, ints if ints else value


def _node(buf: memoryview) -> OnnxNode:
    node = OnnxNode("", "", [], [])
    for number, _wire, value in _fields(buf):
        if number == 1:
            node.inputs.append(_text(value))
        elif number == 2:
            node.outputs.append(_text(value))
        elif number == 3:
            node.name = _text(value)
        elif number == 4:
            node.op = _text(value)
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
    for number, wire, value in _fields(data):
        if number == 7 and wire == 2:
            graph = value
        elif number == 2 and wire == 2:
            producer = _text(value)
    if graph is None:
        raise ModelFormatError(f"{path} is not an ONNX model (no graph)")
    nodes, inits = [], {}
    for number, wire, value in _fields(graph):
        if number == 1 and wire == 2:
            nodes.append(_node(value))
        elif number == 5 and wire == 2:
            name, array = _tensor(value)
            inits[name] = array
    if not nodes:
        raise ModelFormatError(f"{path} is not an ONNX model (its graph has no nodes)")
    return OnnxGraph(nodes, inits, producer)


# --- weights --------------------------------------------------------------------------------


def module_of(node_name: str) -> str:
    """The Kokoro module an exported node belongs to, from its scope.

    ``/encoder/text_encoder/cnn.0/cnn.0.0/Conv_quant`` is ``text_encoder.cnn.0.0``; a module run
    again gets a numbered scope (ALBERT's one shared layer runs 12 times: ``query_1`` ...), which
    is the same module; the predictor's F0/N blocks, projections and shared LSTM run outside its forward pass, so the
    export scopes them under ``/encoder`` directly: they go back under ``predictor``.
    """
    path: list[str] = []
    for part in [p for p in node_name.split("/") if p][:-1]:  # the last part names the op
        part = _REPEAT.sub("", part)
        if path and part.startswith(path[-1] + "."):
            path[-1] = part  # a list element is scoped below its list: cnn.0 / cnn.0.0
        else:
            path.append(part)
    if path[:2] == ["decoder", "decoder"]:
        path = path[1:]
    elif path[:1] == ["encoder"]:
        path = path[1:]
        if path and path[0].split(".")[0] not in _TOP:
            path = ["predictor", *path]
    else:
        raise ModelFormatError(f"the ONNX node {node_name!r} is outside Kokoro's encoder and decoder")
    if not path:
        raise ModelFormatError(f"the ONNX node {node_name!r} names no module")
    return ".".join(path)


def _named(name: str) -> str | None:
    """The checkpoint name of a named initialiser (``encoder.X`` → ``X``, ``decoder.decoder.X`` →
    ``decoder.X``), or None for quantisation constants and the iSTFT's fixed bases."""
    match = _NAMED.match(name)
    if match is None or name.endswith(_QUANT_PARTS) or ".stft." in name:
        return None
    return ("decoder." if match.group(1) == "decoder.decoder" else "") + match.group(2)


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
        if (key := _named(name)) is not None:
            reader.put(key, value.astype(np.float32))
    out = reader.out
    if "bert.encoder.embedding_hidden_mapping_in.weight" not in out or "decoder.generator.conv_post.weight_v" not in out:
        raise ModelFormatError("this ONNX file is not a Kokoro model")
    hidden = out["bert.encoder.embedding_hidden_mapping_in.weight"].shape[0]
    out.setdefault("bert.pooler.weight", np.zeros((hidden, hidden), np.float32))  # unused by Kokoro
    out.setdefault("bert.pooler.bias", np.zeros((hidden,), np.float32))
    return out


# --- config ---------------------------------------------------------------------------------


def _count(weights: dict[str, np.ndarray], pattern: str) -> int:
    rx = re.compile(pattern)
    return len({m.group(1) for k in weights if (m := rx.match(k))})


def _node_attr(graph: OnnxGraph, module: str, attr: str) -> list[int] | None:
    for node in graph.nodes:
        if node.op in ("Conv", "ConvInteger", "ConvTranspose") and "stft" not in node.name:
            try:
                if module_of(node.name) == module:
                    return node.attrs.get(attr)
            except ModelFormatError:
                continue
    return None


def kokoro_config(graph: OnnxGraph, weights: dict[str, np.ndarray], vocab: dict[str, int]) -> dict[str, Any]:
    """mlx-audio's Kokoro ``ModelConfig`` with the dimensions read from the weights."""
    w = weights
    try:
        hidden = w["bert_encoder.weight"].shape[0]
        bert_hidden, emb = w["bert.encoder.embedding_hidden_mapping_in.weight"].shape
        ups = _count(w, r"^decoder\.generator\.ups\.(\d+)\.weight_v$")
        kernels = [int(w[f"decoder.generator.resblocks.{j}.convs1.0.weight_v"].shape[2])
                   for j in range(_count(w, r"^decoder\.generator\.resblocks\.(\d+)\.") // max(ups, 1))]
        dilations = [[(_node_attr(graph, f"decoder.generator.resblocks.{j}.convs1.{i}", "dilations") or [1])[0]
                      for i in range(3)] for j in range(len(kernels))]
        up_rates = [(_node_attr(graph, f"decoder.generator.ups.{i}", "strides") or [0])[0] for i in range(ups)]
        up_kernels = [int(w[f"decoder.generator.ups.{i}.weight_v"].shape[2]) for i in range(ups)]
        n_fft = int(w["decoder.generator.conv_post.weight_v"].shape[0]) - 2
        query = "bert.encoder.albert_layer_groups.0.albert_layers.0.attention.query"
        layers = sum(1 for n in graph.nodes if n.op == "MatMulInteger" and n.name.startswith("/encoder/bert/")
                     and module_of(n.name) == query)  # ALBERT runs its one layer this many times
        config = {
            "model_type": "kokoro",
            "istftnet": {
                "upsample_kernel_sizes": up_kernels,
                "upsample_rates": up_rates,
                "gen_istft_hop_size": _hop_size(graph, n_fft),
                "gen_istft_n_fft": n_fft,
                "resblock_dilation_sizes": dilations,
                "resblock_kernel_sizes": kernels,
                "upsample_initial_channel": int(w["decoder.generator.ups.0.weight_v"].shape[0]),
            },
            "dim_in": int(w["decoder.asr_res.0.weight_v"].shape[0]),
            "dropout": 0.2,
            "hidden_dim": int(hidden),
            "max_conv_dim": int(hidden),
            "max_dur": int(w["predictor.duration_proj.linear_layer.weight"].shape[0]),
            "multispeaker": True,
            "n_layer": _count(w, r"^text_encoder\.cnn\.(\d+)\."),
            "n_mels": 80,
            "n_token": int(w["text_encoder.embedding.weight"].shape[0]),
            "style_dim": int(w["predictor.text_encoder.lstms.1.fc.weight"].shape[1]),
            "text_encoder_kernel_size": int(w["text_encoder.cnn.0.0.weight_v"].shape[2]),
            "plbert": {
                "hidden_size": int(bert_hidden),
                "num_attention_heads": int(bert_hidden) // 64,
                "intermediate_size": int(w["bert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight"].shape[0]),
                "max_position_embeddings": int(w["bert.embeddings.position_embeddings.weight"].shape[0]),
                "num_hidden_layers": layers,
                "embedding_size": int(emb),
                "dropout": 0.1,
            },
            "sample_rate": SAMPLE_RATE,
            "vocab": vocab,
        }
    except KeyError as exc:
        raise ModelFormatError(f"this Kokoro ONNX file lacks the weight {exc.args[0]}") from None
    if not layers or 0 in up_rates:
        raise ModelFormatError("cannot read Kokoro's dimensions from this ONNX file")
    if max(vocab.values(), default=0) >= config["n_token"]:
        raise ModelFormatError(f"the phoneme vocabulary has ids beyond the model's {config['n_token']} tokens")
    return config


def _hop_size(graph: OnnxGraph, n_fft: int) -> int:
    """The iSTFT hop: the stride of the export's inverse-STFT transposed convolution."""
    for node in graph.nodes:
        if node.op == "ConvTranspose" and "stft" in node.name and node.attrs.get("strides"):
            return int(node.attrs["strides"][0])
    return n_fft // 4


# --- the folder -----------------------------------------------------------------------------


def is_kokoro_onnx(folder: Path) -> bool:
    """Whether ``folder`` holds a Kokoro ONNX model as shipped: an ``.onnx``, the phoneme vocab
    (``vocab.json``, or a ``config.json`` with ``vocab``) and voice packs (``voices*.npz``, or
    kokoro-onnx's ``voices*.bin``, an npz by another name)."""
    folder = Path(folder)
    return (folder.is_dir() and any(folder.glob("*.onnx")) and _vocab_file(folder) is not None
            and bool(_voice_files(folder)))


def _vocab_file(folder: Path) -> Path | None:
    if (folder / "vocab.json").is_file():
        return folder / "vocab.json"
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return folder / "config.json" if isinstance(config, dict) and isinstance(config.get("vocab"), dict) else None


def _voice_files(folder: Path) -> list[Path]:
    return sorted([*Path(folder).glob("voices*.npz"), *Path(folder).glob("voices*.bin")])


def is_mlx_kokoro(folder: Path) -> bool:
    """Whether ``folder`` is an mlx-audio Kokoro folder (config.json, safetensors, voices)."""
    try:
        config = json.loads((Path(folder) / "config.json").read_text())
    except (OSError, ValueError):
        return False
    return (isinstance(config, dict) and config.get("model_type") == "kokoro" and "istftnet" in config
            and any(Path(folder).glob("*.safetensors")))


def read_vocab(path: Path) -> dict[str, int]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelFormatError(f"cannot read the phoneme vocabulary {path}: {exc}") from None
    vocab = data.get("vocab", data) if isinstance(data, dict) else None
    if not isinstance(vocab, dict) or not all(isinstance(k, str) and isinstance(v, int) for k, v in vocab.items()):
        raise ModelFormatError(f"{path} is not a phoneme vocabulary (symbol → id)")
    return vocab


def read_voices(folder: Path, style_dim: int) -> dict[str, np.ndarray]:
    """Every voice pack in the folder's ``voices*.npz`` / ``voices*.bin`` files, as (rows, 1, 2 * style_dim) float32."""
    voices: dict[str, np.ndarray] = {}
    for path in _voice_files(folder):
        try:
            with np.load(path, allow_pickle=False) as packs:
                for name in packs.files:
                    voices[name] = np.asarray(packs[name], dtype=np.float32)
        except (OSError, ValueError) as exc:
            raise ModelFormatError(f"cannot read the voice packs in {path}: {exc}") from None
    if not voices:
        raise ModelFormatError(f"{folder} has no voice packs (voices*.npz or voices*.bin)")
    for name, pack in voices.items():
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or name.startswith("."):
            raise ModelFormatError(f"voice pack {name!r} has a name that cannot be a file name")
        if pack.ndim == 2:
            voices[name] = pack = pack[:, None, :]
        if pack.ndim != 3 or pack.shape[1:] != (1, 2 * style_dim):
            raise ModelFormatError(f"voice pack {name} has shape {pack.shape}, expected (rows, 1, {2 * style_dim})")
    return voices


def convert_kokoro(src: Path, out: Path, progress: Progress = None) -> dict[str, Any]:
    """Write the mlx-audio Kokoro folder for the shipped ONNX folder ``src`` into ``out``.

    Returns facts for the manifest: the ONNX file, parameter and tensor counts, voices."""
    import mlx.core as mx

    src, out = Path(src), Path(out)
    models = sorted(src.glob("*.onnx"))
    if len(models) != 1:
        raise ModelFormatError(f"{src} should hold one .onnx file, it holds {len(models)}")
    vocab_file = _vocab_file(src)
    if vocab_file is None:
        raise ModelFormatError(f"{src} has no phoneme vocabulary", hint="it needs vocab.json (symbol → id)")
    vocab = read_vocab(vocab_file)
    _say(progress, f"reading {models[0].name}")
    graph = read_onnx(models[0])
    weights = kokoro_weights(graph)
    config = kokoro_config(graph, weights, vocab)
    voices = read_voices(src, config["style_dim"])
    del graph
    out.mkdir(parents=True, exist_ok=True)
    _say(progress, f"writing {WEIGHTS} ({len(weights)} tensors) and {len(voices)} voices")
    mx.save_safetensors(str(out / WEIGHTS), {k: mx.array(v) for k, v in sorted(weights.items())},
                        metadata={"format": "mlx"})
    (out / "voices").mkdir(exist_ok=True)
    for name, pack in voices.items():
        mx.save_safetensors(str(out / "voices" / f"{name}.safetensors"), {"voice": mx.array(pack)})
    _write_json(out / "config.json", config)
    _write_json(out / "vocab.json", {"vocab": vocab})
    return {
        "onnx": models[0].name,
        "parameters": int(sum(v.size for v in weights.values())),
        "tensors": len(weights),
        "voices": sorted(voices),
        "sample_rate": config["sample_rate"],
        "zero_filled": ["bert.pooler.weight", "bert.pooler.bias"],
    }


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _say(progress: Progress, message: str) -> None:
    if progress is not None:
        progress(message)
