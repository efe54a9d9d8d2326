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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlxctl.audio.kokoro_dims import SAMPLE_RATE, kokoro_config
from mlxctl.audio.kokoro_files import (
    find_vocab,
    is_kokoro_onnx,
    is_mlx_kokoro,
    read_vocab,
    read_voices,
)
from mlxctl.audio.kokoro_scopes import module_of
from mlxctl.audio.kokoro_tensors import kokoro_weights
from mlxctl.audio.onnx_reader import OnnxGraph, OnnxNode, read_onnx
from mlxctl.errors import ModelFormatError

__all__ = ["RECIPE", "SAMPLE_RATE", "VOICE_ROWS", "WEIGHTS", "OnnxGraph", "OnnxNode", "convert_kokoro",
           "is_kokoro_onnx", "is_mlx_kokoro", "kokoro_config", "kokoro_weights", "module_of", "read_onnx",
           "read_vocab", "read_voices"]

RECIPE = "onnx-kokoro"
WEIGHTS = "weights.safetensors"
VOICE_ROWS = 510  # a voice pack has one style vector per phoneme count 1..510

Progress = Callable[[str], None] | None


def convert_kokoro(src: Path, out: Path, progress: Progress = None) -> dict[str, Any]:
    """Write the mlx-audio Kokoro folder for the shipped ONNX folder ``src`` into ``out``.

    Returns facts for the manifest: the ONNX file, parameter and tensor counts, voices."""
    import mlx.core as mx

    src, out = Path(src), Path(out)
    models = sorted(src.glob("*.onnx"))
    if len(models) != 1:
        raise ModelFormatError(f"{src} should hold one .onnx file, it holds {len(models)}")
    vocab_file = find_vocab(src)
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
