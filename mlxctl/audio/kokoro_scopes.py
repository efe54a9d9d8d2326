"""Kokoro's ONNX export names to its PyTorch checkpoint's: the module of a node, from its scope,
and the checkpoint name of a named initialiser."""

from __future__ import annotations

import re

from mlxctl.errors import ModelFormatError

_TOP = ("bert", "bert_encoder", "predictor", "text_encoder", "decoder")
_REPEAT = re.compile(r"_\d+$")  # torch.onnx numbers the scopes of a module run more than once
_NAMED = re.compile(r"^(encoder|decoder\.decoder)\.([\w.]+)$")
_QUANT_PARTS = ("_quantized", "_scale", "_zero_point", "_reshape_shape")


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


def checkpoint_name(name: str) -> str | None:
    """The checkpoint name of a named initialiser (``encoder.X`` → ``X``, ``decoder.decoder.X`` →
    ``decoder.X``), or None for quantisation constants and the iSTFT's fixed bases."""
    match = _NAMED.match(name)
    if match is None or name.endswith(_QUANT_PARTS) or ".stft." in name:
        return None
    return ("decoder." if match.group(1) == "decoder.decoder" else "") + match.group(2)
