"""ONNX models (Kokoro's int8 export): parameters, dtypes and 8-bit quantisation from the graph.

An ONNX file has no header apart from its graph, so the graph is read with
:func:`mlxctl.audio.onnx_reader.read_onnx` (initialisers are views of the file's bytes, nothing is
converted). Parameters are the initialisers of float and 8-bit integer types; quantisation
scales and zero points (found by where the quantised operators take them) and integer shape
constants are not parameters. ONNX Runtime's quantiser stores 8-bit weights for
``MatMulInteger`` / ``ConvInteger`` / ``DynamicQuantizeLSTM`` (dynamic: activations are
quantised while running) or ``QLinear*`` operators (static), with a scale per tensor or per
channel (a zero point or scale with more than one value).
"""

from __future__ import annotations

from pathlib import Path

from mlxctl.errors import ModelFormatError
from mlxctl.models.inspect_facts import _Facts, _size, _tally

# operator: the input positions that hold quantisation scales and zero points
_QPARAM_INPUTS = {
    "DequantizeLinear": (1, 2),
    "QuantizeLinear": (1, 2),
    "MatMulInteger": (2, 3),
    "ConvInteger": (2, 3),
    "DynamicQuantizeMatMul": (2, 3),
    "MatMulIntegerToFloat": (2, 3, 4, 5),
    "QLinearMatMul": (1, 2, 4, 5, 6, 7),
    "QLinearConv": (1, 2, 4, 5, 6, 7),
    "DynamicQuantizeLSTM": (8, 9, 10, 11),
}
_DYNAMIC = {"MatMulInteger", "ConvInteger", "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "DynamicQuantizeLSTM",
            "DynamicQuantizeLinear"}
_STATIC = {"QLinearMatMul", "QLinearConv"}
_FLOATS = ("float16", "float32", "float64", "bfloat16")
_INT8 = ("int8", "uint8")


def _onnx_facts(onnx: list[Path], files: list[Path]) -> _Facts:
    """What the graph of the largest .onnx file says (the others count towards the size only)."""
    from mlxctl.audio.onnx_reader import read_onnx

    main = max(onnx, key=_size)
    try:
        graph = read_onnx(main)
    except ModelFormatError:  # external data, an unknown tensor type, not ONNX after all: the size is all we know
        return _Facts(format="onnx", files=files, weights_bytes=sum(map(_size, onnx)), decoder=False)
    qparams = _qparams(graph)
    types: dict[str, dict] = {}
    scales = []
    for name, array in graph.initializers.items():
        dtype = str(array.dtype)
        if name in qparams:
            scales.append(array.size)
            continue
        if dtype in _FLOATS or dtype in _INT8:
            _tally(types, dtype, int(array.size))
    floats = [t for t in types if t in _FLOATS]
    return _Facts(
        format="onnx",
        files=files,
        parameters=sum(t["parameters"] for t in types.values()),
        weights_bytes=sum(map(_size, onnx)),
        dtype=max(floats, key=lambda t: types[t]["parameters"]) if floats else None,
        quantization=_quantization(graph.nodes, types, scales),
        tensor_types=types,
        decoder=False,
    )


def _qparams(graph) -> set[str]:
    """Initialisers that are quantisation scales or zero points: inputs in those positions of
    quantised operators, and ``W_scale`` / ``W_zero_point`` beside each ``W_quantized`` (the
    quantiser's names; a ``MatMulInteger``'s weight scale is applied by a plain ``Mul``)."""
    names = {x for n in graph.nodes for i, x in enumerate(n.inputs) if i in _QPARAM_INPUTS.get(n.op, ())}
    for name in graph.initializers:
        if name.endswith("_quantized"):
            base = name.removesuffix("_quantized")
            names |= {f"{base}_scale", f"{base}_zero_point"}
    return names & set(graph.initializers)


def _quantization(nodes: list, types: dict[str, dict], scales: list[int]) -> dict | None:
    quantized = {t: v for t, v in types.items() if t in _INT8}
    if not quantized:
        return None
    ops = {n.op for n in nodes}
    mode = "dynamic" if ops & _DYNAMIC else "static" if ops & _STATIC else "weight-only"
    granularity = "per-tensor" if all(s == 1 for s in scales) else "per-channel"
    total = sum(v["parameters"] for v in types.values())
    share = sum(v["parameters"] for v in quantized.values())
    return {
        "method": "onnx",
        "bits": 8,
        "group_size": None,
        "mode": mode,
        "granularity": granularity,
        "types": sorted(quantized),
        "quantized_parameters": share,
        "operators": sorted(ops & (_DYNAMIC | _STATIC | {"DequantizeLinear"})),
        "note": f"{granularity} scales, {' and '.join(sorted(quantized))} weights; "
        f"{100 * share / total:.1f}% of the parameters",
    }
