"""Swap a model's quantised layers for float ones (public mlx.nn APIs only).

On the CPU backend float32 matmuls decode 2-3x faster than 4-bit kernels, so a small quantised
model is worth unpacking after load. Tied embeddings keep working: llama's ``as_linear`` is a
method of the float ``nn.Embedding`` too.
"""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_unflatten


def dequantize_model(model: nn.Module, dtype: mx.Dtype) -> int:
    """Replace every QuantizedLinear / QuantizedEmbedding in ``model``; return how many."""
    swaps = [
        (path, float_module(module, dtype))
        for path, module in model.named_modules()
        if isinstance(module, (nn.QuantizedLinear, nn.QuantizedEmbedding))
    ]
    if swaps:
        model.update_modules(tree_unflatten(swaps))
    return len(swaps)


def float_module(module: nn.Module, dtype: mx.Dtype) -> nn.Module:
    """The float layer a QuantizedLinear or QuantizedEmbedding stands for."""
    weight = _dequantized_weight(module, dtype)
    if isinstance(module, nn.QuantizedEmbedding):
        layer = nn.Embedding(*weight.shape)
    else:
        layer = nn.Linear(weight.shape[1], weight.shape[0], bias="bias" in module)
        if "bias" in module:
            layer.bias = module.bias.astype(dtype)
    layer.weight = weight
    return layer


def _dequantized_weight(module: nn.Module, dtype: mx.Dtype) -> mx.array:
    scales, biases = module.scales, module.get("biases")
    if module.mode == "affine":
        # Unpack in float32, then cast: exact for every target, and on the CPU backend about
        # 10x faster than asking mx.dequantize for float32 output from float16 scales.
        scales = scales.astype(mx.float32)
        biases = None if biases is None else biases.astype(mx.float32)
    weight = mx.dequantize(
        module.weight,
        scales,
        biases,
        group_size=module.group_size,
        bits=module.bits,
        mode=module.mode,
        global_scale=module.get("global_scale"),
    )
    return weight.astype(dtype)
