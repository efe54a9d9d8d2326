"""Llama 3 rope scaling, put back from the ``rope_freqs.weight`` tensor of a llama GGUF.

llama.cpp's converter does not write Llama 3's ``rope_scaling`` values (factor,
low/high_freq_factor, original_max_position_embeddings); it writes their result, one divisor per
rotary frequency: 1 for short wavelengths, ``factor`` for long ones, and
``1 / ((1 - s) / factor + s)`` between, with ``s = (L / wavelength - low) / (high - low)``.
``s`` is the same for (L, low, high) and (kL, k low, k high), so L is fixed at llama.cpp's
default (8192) and low/high are solved from the in-between divisors. The values found are
checked by recomputing every divisor; a tensor that does not follow this rule is refused.
"""

from __future__ import annotations

import math

import mlx.core as mx
import numpy as np

from mlxctl.errors import ModelFormatError

ORIGINAL_CONTEXT = 8192
_TOLERANCE = 1e-4


def llama3_rope_scaling(freq_factors: mx.array, theta: float, head_dim: int) -> dict:
    """mlx-lm's ``{"rope_type": "llama3", ...}`` whose divisors are ``freq_factors``."""
    factors = np.array(freq_factors.astype(mx.float32), dtype=np.float64).reshape(-1)
    if factors.shape[0] != head_dim // 2:
        raise _refuse(f"it has {factors.shape[0]} values for {head_dim // 2} rotary frequencies")
    wavelengths = 2 * math.pi * theta ** (np.arange(0, head_dim, 2) / head_dim)
    factor = float(factors.max())
    medium = (factors > 1 + _TOLERANCE) & (factors < factor * (1 - _TOLERANCE))
    if medium.sum() < 2:
        raise _refuse("fewer than two of its values lie between 1 and the scaling factor")
    smooth = (1 / factors[medium] - 1 / factor) / (1 - 1 / factor)
    slope, intercept = np.polyfit(ORIGINAL_CONTEXT / wavelengths[medium], smooth, 1)
    low = -intercept / slope
    scaling = {
        "rope_type": "llama3",
        "factor": factor,
        "low_freq_factor": float(low),
        "high_freq_factor": float(low + 1 / slope),
        "original_max_position_embeddings": ORIGINAL_CONTEXT,
    }
    if not np.allclose(divisors(scaling, wavelengths), factors, rtol=_TOLERANCE):
        raise _refuse("its values do not follow llama 3's rope scaling rule")
    return scaling


def divisors(scaling: dict, wavelengths: np.ndarray) -> np.ndarray:
    """The per-frequency divisors llama.cpp's converter computes from ``scaling``."""
    factor, context = scaling["factor"], scaling["original_max_position_embeddings"]
    low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
    smooth = (context / wavelengths - low) / (high - low)
    between = 1 / ((1 - smooth) / factor + smooth)
    out = np.where(wavelengths < context / high, 1.0, between)
    return np.where(wavelengths > context / low, factor, out)


def _refuse(why: str) -> ModelFormatError:
    return ModelFormatError(
        f"GGUF tensor 'rope_freqs.weight' (llama 3 rope scaling) cannot be imported: {why}",
        hint="mlxctl imports rope_freqs tensors written by llama.cpp's converter for Llama 3",
    )
