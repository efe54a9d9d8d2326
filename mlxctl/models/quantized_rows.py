"""Quantized layers that hand MLX all their rows as one matrix.

A decode step calls every linear layer on activations shaped (rows, 1, hidden): one token per
running request. MLX's quantized matmul on CUDA (0.32) reads the second-to-last dimension as
the problem's rows and the leading one as a batch of separate problems over the same weight, so
16 requests ran 16 one-row kernels, each reading the whole 4-bit weight: Llama-3.1-8B 4-bit
decoded at about 250 tok/s from 16 streams up, mlx-lm's own batching too (docs/benchmarks.md,
issue 18). Folding the leading dimensions into the rows first gives one (rows, hidden) problem
that reads the weight once. The reshape is free for contiguous activations and the arithmetic is
the same on every backend, so the layers are swapped wherever a model is loaded.
"""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn


def _folded(matmul, x: mx.array) -> mx.array:
    if x.ndim <= 2:
        return matmul(x)
    lead = x.shape[:-1]
    out = matmul(x.reshape(-1, x.shape[-1]))
    return out.reshape(*lead, out.shape[-1])


class RowsQuantizedLinear(nn.QuantizedLinear):
    """``nn.QuantizedLinear`` that folds leading dimensions into the matmul's rows."""

    def __call__(self, x: mx.array) -> mx.array:
        return _folded(super().__call__, x)


class RowsQuantizedEmbedding(nn.QuantizedEmbedding):
    """``nn.QuantizedEmbedding`` whose tied output projection folds leading dimensions."""

    def as_linear(self, x: mx.array) -> mx.array:
        return _folded(super().as_linear, x)


_SWAPS = ((nn.QuantizedLinear, RowsQuantizedLinear), (nn.QuantizedEmbedding, RowsQuantizedEmbedding))


def fold_quantized_rows(model: nn.Module) -> int:
    """Give every exactly-``QuantizedLinear`` / ``QuantizedEmbedding`` of ``model`` the folding
    call, in place (the parameters stay where they are); return how many layers changed.
    Subclasses (a model's own quantized layers) are left alone: their calls may differ."""
    swapped = 0
    for _, module in model.named_modules():
        for plain, folding in _SWAPS:
            if type(module) is plain:
                module.__class__ = folding
                swapped += 1
    return swapped
