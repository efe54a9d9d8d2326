"""GGUF's K-quant super-blocks of 256 values, decoded as llama.cpp's ggml-quants.c does.

Q4_K and Q5_K have eight sub-blocks of 32, each with its own scale and minimum, so they map
exactly onto MLX affine groups of 32 (``q4_k``/``q5_k`` return ``(q, scale, bias)`` per 32-value
group, like :mod:`mlxctl.models.gguf_blocks`). Q6_K, Q3_K and Q2_K have sixteen sub-blocks of
16; MLX's smallest group is 32, so they are decoded to float32 values ``(n, 256)`` here and
re-quantised by :mod:`mlxctl.models.gguf_decode`. Layouts (``d``, ``dmin`` float16):

- Q4_K, 144 bytes: ``d``, ``dmin``, 12 bytes of 6-bit scales and mins (``get_scale_min_k4``),
  128 bytes of nibbles: sub-blocks 2k and 2k + 1 are the low and high nibbles of bytes 32k..32k+31;
  ``x = d sc q - dmin m``.
- Q5_K, 176 bytes: as Q4_K with 32 bytes ``qh`` before the nibbles: bit s of ``qh[l]`` is the
  fifth bit of value l of sub-block s.
- Q6_K, 210 bytes: 128 bytes ``ql`` (low 4 bits), 64 bytes ``qh`` (high 2 bits), 16 int8 scales,
  ``d``; ``x = d sc[p // 16] (q - 32)``.
- Q3_K, 110 bytes: 32 bytes ``hmask``, 64 bytes of 2-bit ``qs``, 12 bytes of 6-bit scales, ``d``;
  ``x = d (sc - 32) (q - (4 if the hmask bit is clear else 0))``.
- Q2_K, 84 bytes: 16 bytes of 4-bit scale and 4-bit min, 64 bytes of 2-bit ``qs``, ``d``, ``dmin``;
  ``x = d (sc & 15) q - dmin (sc >> 4)``.
"""

from __future__ import annotations

import numpy as np

from mlxctl.models.gguf_blocks import Decoded, half

SUPER = 256


def scale_min_k4(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The eight 6-bit (scale, min) pairs of each 12-byte ``scales`` field: ``(n, 8)`` each."""
    s = packed.astype(np.uint8)
    low_sc, low_m = s[:, 0:4] & 63, s[:, 4:8] & 63
    high_sc = (s[:, 8:12] & 0x0F) | ((s[:, 0:4] >> 6) << 4)
    high_m = (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)
    return np.concatenate([low_sc, high_sc], 1), np.concatenate([low_m, high_m], 1)


def _k4_groups(blocks: np.ndarray, qs: np.ndarray, fifth: np.ndarray | None) -> Decoded:
    d, dmin = half(blocks, 0), half(blocks, 2)
    sc, m = scale_min_k4(blocks[:, 4:16])
    pairs = qs.reshape(-1, 4, 32)  # 4 runs of 32 bytes, each holding two sub-blocks
    q = np.stack([pairs & 0x0F, pairs >> 4], axis=2).reshape(-1, 8, 32)
    if fifth is not None:
        q = q | (fifth << 4)
    scale = d[:, None] * sc.astype(np.float32)
    bias = -(dmin[:, None] * m.astype(np.float32))
    return q.reshape(-1, 32), scale.reshape(-1), bias.reshape(-1)


def q4_k(blocks: np.ndarray) -> Decoded:
    return _k4_groups(blocks, blocks[:, 16:144], None)


def q5_k(blocks: np.ndarray) -> Decoded:
    qh = blocks[:, 16:48]  # (n, 32): bit s of byte l belongs to sub-block s
    fifth = (qh[:, None, :] >> np.arange(8, dtype=np.uint8)[None, :, None]) & 1
    return _k4_groups(blocks, blocks[:, 48:176], fifth)


def q6_k(blocks: np.ndarray) -> np.ndarray:
    ql = blocks[:, 0:128].reshape(-1, 2, 2, 32)  # [half][ql + 0 / ql + 32][l]
    qh = blocks[:, 128:192].reshape(-1, 2, 1, 32)
    sc = blocks[:, 192:208].view(np.int8).astype(np.float32)
    d = half(blocks, 208)
    low = np.stack([ql[:, :, 0] & 0x0F, ql[:, :, 1] & 0x0F, ql[:, :, 0] >> 4, ql[:, :, 1] >> 4], 2)
    shifts = np.array([0, 2, 4, 6], dtype=np.uint8)[None, None, :, None]
    high = (qh >> shifts) & 3
    q = (low | (high << 4)).astype(np.float32).reshape(-1, SUPER) - 32
    return d[:, None] * np.repeat(sc, 16, axis=1) * q


def q3_k_scales(packed: np.ndarray) -> np.ndarray:
    """The sixteen 6-bit scales of each 12-byte field, minus 32: ``(n, 16)`` float32."""
    low = np.concatenate([packed[:, 0:8] & 0x0F, packed[:, 0:8] >> 4], 1)
    hi_src = np.tile(packed[:, 8:12], 4)  # scale i takes bits 2 (i // 4) of byte 8 + i % 4
    shifts = np.repeat(np.array([0, 2, 4, 6], dtype=np.uint8), 4)[None, :]
    high = (hi_src >> shifts) & 3
    return (low | (high << 4)).astype(np.float32) - 32


def _two_bit_codes(qs: np.ndarray) -> np.ndarray:
    """64 bytes -> 256 codes: value 128 n + 32 j + l is bits 2j of byte 32 n + l."""
    halves = qs.reshape(-1, 2, 1, 32)
    shifts = np.array([0, 2, 4, 6], dtype=np.uint8)[None, None, :, None]
    return ((halves >> shifts) & 3).reshape(-1, SUPER)


def q3_k(blocks: np.ndarray) -> np.ndarray:
    q = _two_bit_codes(blocks[:, 32:96]).astype(np.float32)
    hmask = blocks[:, 0:32]  # bit 4 n + j of byte l belongs to value 128 n + 32 j + l
    bits = (hmask[:, None, :] >> np.arange(8, dtype=np.uint8)[None, :, None]) & 1
    q -= 4 * (1 - bits.reshape(-1, SUPER).astype(np.float32))
    scales = q3_k_scales(blocks[:, 96:108])
    return half(blocks, 108)[:, None] * np.repeat(scales, 16, axis=1) * q


def q2_k(blocks: np.ndarray) -> np.ndarray:
    sc = blocks[:, 0:16]
    q = _two_bit_codes(blocks[:, 16:80]).astype(np.float32)
    d, dmin = half(blocks, 80), half(blocks, 82)
    scale = np.repeat(d[:, None] * (sc & 0x0F).astype(np.float32), 16, axis=1)
    minimum = np.repeat(dmin[:, None] * (sc >> 4).astype(np.float32), 16, axis=1)
    return scale * q - minimum


# type -> (decoder, bits, block bytes); bits is None where the values come back as floats
K_TYPES = {
    "Q4_K": (q4_k, 4, 144),
    "Q5_K": (q5_k, 5, 176),
    "Q6_K": (q6_k, None, 210),
    "Q3_K": (q3_k, None, 110),
    "Q2_K": (q2_k, None, 84),
}
