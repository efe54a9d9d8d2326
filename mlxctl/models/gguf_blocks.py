"""GGUF's 32-value block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) as MLX affine groups of 32.

Each decoder takes the raw blocks, one per row of a ``(n, block bytes)`` uint8 array, and returns
``(q, scale, bias)``: unsigned codes ``(n, 32)`` and one float32 scale and bias per block, with
``x = scale * q + bias`` equal to llama.cpp's ``dequantize_row_*`` (ggml-quants.c) for every value.
Layouts (all little-endian; ``d`` and ``m`` are float16):

- Q4_0, 18 bytes: ``d``, 16 bytes of nibbles (value j low, value j + 16 high in byte j);
  ``x = (q - 8) d``.
- Q4_1, 20 bytes: ``d``, ``m``, nibbles as Q4_0; ``x = q d + m``.
- Q5_0, 22 bytes: ``d``, a uint32 ``qh`` whose bit j is the fifth bit of value j, nibbles as Q4_0;
  ``x = (q - 16) d``.
- Q5_1, 24 bytes: ``d``, ``m``, ``qh``, nibbles; ``x = q d + m``.
- Q8_0, 34 bytes: ``d``, 32 signed bytes; ``x = q d`` (kept as ``q + 128`` with bias ``-128 d``).
"""

from __future__ import annotations

import numpy as np

Decoded = tuple[np.ndarray, np.ndarray, np.ndarray]


def half(blocks: np.ndarray, start: int) -> np.ndarray:
    """The float16 at byte ``start`` of every block, as float32 ``(n,)``."""
    return blocks[:, start : start + 2].copy().view(np.float16)[:, 0].astype(np.float32)


def nibbles(qs: np.ndarray) -> np.ndarray:
    """16 bytes -> 32 codes: the low nibbles first, then the high ones."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=1)


def high_bits(qh: np.ndarray) -> np.ndarray:
    """4 bytes -> 32 bits, bit j of the little-endian uint32 first."""
    return np.unpackbits(qh, axis=1, bitorder="little")


def q4_0(blocks: np.ndarray) -> Decoded:
    d = half(blocks, 0)
    return nibbles(blocks[:, 2:18]), d, -8 * d


def q4_1(blocks: np.ndarray) -> Decoded:
    return nibbles(blocks[:, 4:20]), half(blocks, 0), half(blocks, 2)


def q5_0(blocks: np.ndarray) -> Decoded:
    d = half(blocks, 0)
    q = nibbles(blocks[:, 6:22]) | (high_bits(blocks[:, 2:6]) << 4)
    return q, d, -16 * d


def q5_1(blocks: np.ndarray) -> Decoded:
    q = nibbles(blocks[:, 8:24]) | (high_bits(blocks[:, 4:8]) << 4)
    return q, half(blocks, 0), half(blocks, 2)


def q8_0(blocks: np.ndarray) -> Decoded:
    d = half(blocks, 0)
    q = (blocks[:, 2:34].view(np.int8).astype(np.int16) + 128).astype(np.uint8)
    return q, d, -128 * d


# type -> (decoder, bits, block bytes)
BLOCK_TYPES = {
    "Q4_0": (q4_0, 4, 18),
    "Q4_1": (q4_1, 4, 20),
    "Q5_0": (q5_0, 5, 22),
    "Q5_1": (q5_1, 5, 24),
    "Q8_0": (q8_0, 8, 34),
}
