"""inspect_model on ONNX: parameters, dtypes and 8-bit quantisation from the graph (hand-built
graphs, then the real int8 kokoro-82m from its wheels)."""

from __future__ import annotations

import json

import numpy as np

from mlxctl.models.inspect import inspect_model, read_facts
from mlxctl.models.store import ModelStore
from tests.audio.test_kokoro_convert import node, write_onnx

BIG = (1 << 40, "test")


def _dynamic_graph(folder):
    """A MatMulInteger layer as ONNX Runtime's quantiser writes it (int8 weight, per-column zero
    point, its scale applied by a Mul), a float bias, a per-tensor uint8 conv and a shape constant."""
    folder.mkdir()
    inits = {
        "fc.weight_quantized": np.ones((8, 4), np.int8),
        "fc.weight_zero_point": np.zeros(4, np.int8),
        "fc.weight_scale": np.full(4, 0.1, np.float32),
        "fc.bias": np.zeros(4, np.float32),
        "conv.weight_quantized": np.ones((2, 3, 5), np.uint8),
        "conv.weight_zero_point": np.array(128, np.uint8),
        "shape": np.array([1, -1], np.int64),
    }
    nodes = [
        node("q", "DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
        node("mm", "MatMulInteger", ["xq", "fc.weight_quantized", "xz", "fc.weight_zero_point"], ["y"]),
        node("scale", "Mul", ["y", "fc.weight_scale"], ["ys"]),
        node("bias", "Add", ["ys", "fc.bias"], ["out"]),
        node("conv", "ConvInteger", ["xq", "conv.weight_quantized", "xz", "conv.weight_zero_point"], ["c"]),
        node("reshape", "Reshape", ["c", "shape"], ["r"]),
    ]
    write_onnx(folder / "model.int8.onnx", nodes, inits)
    (folder / "vocab.json").write_text(json.dumps({"a": 1}))
    return folder


def test_dynamic_int8_graph(tmp_path):
    folder = _dynamic_graph(tmp_path / "tts")
    facts = read_facts(folder)
    assert facts.format == "onnx" and facts.decoder is False
    assert facts.parameters == 8 * 4 + 4 + 2 * 3 * 5  # no scales, zero points or shape constants
    assert facts.tensor_types == {"int8": {"tensors": 1, "parameters": 32},
                                  "float32": {"tensors": 1, "parameters": 4},
                                  "uint8": {"tensors": 1, "parameters": 30}}
    assert facts.dtype == "float32"
    q = facts.quantization
    assert (q["method"], q["bits"], q["mode"], q["granularity"]) == ("onnx", 8, "dynamic", "per-channel")
    assert q["types"] == ["int8", "uint8"] and q["quantized_parameters"] == 62
    assert q["operators"] == ["ConvInteger", "DynamicQuantizeLinear", "MatMulInteger"]
    report = inspect_model(str(folder), limit=BIG)
    assert report["parameters"] == 66
    assert report["memory"]["weights_bytes"] == (folder / "model.int8.onnx").stat().st_size
    assert report["memory"]["kv_cache_bytes"] is None


def test_float_graph_is_not_quantized(tmp_path):
    folder = tmp_path / "float"
    folder.mkdir()
    inits = {"w": np.ones((3, 2), np.float32), "b": np.zeros(2, np.float32)}
    write_onnx(folder / "model.onnx", [node("mm", "MatMul", ["x", "w"], ["y"]), node("a", "Add", ["y", "b"], ["z"])],
               inits)
    facts = read_facts(folder)
    assert facts.parameters == 8 and facts.dtype == "float32" and facts.quantization is None
    assert facts.tensor_types == {"float32": {"tensors": 2, "parameters": 8}}


def test_real_kokoro_82m(model_home):
    from mlxctl.models.acquire import acquire

    store = ModelStore(model_home)
    acquire("kokoro-82m", store=store)  # from the shared test cache; fetched once per machine
    report = inspect_model("kokoro-82m", store=store, limit=BIG)
    assert report["kind"] == "tts" and report["format"] == "onnx"
    assert 80_000_000 < report["parameters"] < 83_000_000  # Kokoro-82M
    assert report["dtype"] == "float32"
    types = report["tensor_types"]
    assert set(types) == {"int8", "uint8", "float32"}
    assert sum(t["parameters"] for t in types.values()) == report["parameters"]
    q = report["quantization"]
    assert (q["bits"], q["mode"], q["types"]) == (8, "dynamic", ["int8", "uint8"])
    assert {"MatMulInteger", "ConvInteger", "DynamicQuantizeLSTM"} <= set(q["operators"])
    assert q["quantized_parameters"] > 0.95 * report["parameters"]
    assert report["memory"]["weights_bytes"] < report["size_bytes"] < 100_000_000


def test_an_onnx_file_the_reader_cannot_parse_still_has_a_format_and_size(tmp_path):
    folder = tmp_path / "odd"
    folder.mkdir()
    (folder / "model.onnx").write_bytes(b"\x08\x09")  # a header field and no graph
    facts = read_facts(folder)
    assert (facts.format, facts.parameters, facts.quantization, facts.weights_bytes) == ("onnx", None, None, 2)
