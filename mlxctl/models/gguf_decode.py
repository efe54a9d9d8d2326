"""One GGUF tensor -> MLX arrays: an affine triplet at group size 32, or a float array.

- Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K: exact. Their codes are packed the way
  ``mx.quantize`` packs them (a little-endian bit stream in uint32 words), so ``mx.dequantize``
  gives llama.cpp's values bit for bit. Scales and biases are float16 in a file of 32-value
  block types only (``d``, ``-8 d``, ``m`` ... are float16 values already), float32 in a file
  with any K-quant (``d * sc`` needs up to 17 significant bits): one dtype per model.
- Q6_K, Q3_K, Q2_K (16-value sub-blocks): decoded to float32, then re-quantised to 8 bits per
  group of 32 (min/max affine): each value is off by at most half a step, ``(max - min) / 510``
  of its group.
- F32, F16, BF16: as they are. A quantised 3-D tensor (a MoE's stacked experts,
  ``(experts, out, in)``) stays quantised along its last axis, as mlx-lm's
  ``QuantizedSwitchLinear`` takes it; any other quantised tensor that is not 2-D is dequantised
  to float32.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from mlxctl.errors import ModelFormatError
from mlxctl.models.gguf_blocks import BLOCK_TYPES
from mlxctl.models.gguf_kquants import K_TYPES
from mlxctl.models.gguf_reader import GGUFFile, TensorInfo, element_count, tensor_bytes

GROUP = 32
REQUANT_BITS = 8
_FLOATS = {"F32": (np.float32, 4), "F16": (np.float16, 2), "BF16": (np.uint16, 2)}
QUANT_TYPES = {**BLOCK_TYPES, **K_TYPES}
SUPPORTED_TYPES = (*_FLOATS, *QUANT_TYPES)
_ROWS_PER_CHUNK = 4096  # bounds the numpy temporaries of one big tensor


def load_tensor(
    gguf: GGUFFile, info: TensorInfo, scale_dtype: type = np.float32
) -> dict[str, mx.array]:
    """``{"weight": ...}`` or ``{"weight", "scales", "biases"}`` for the tensor ``info``."""
    if info.kind in _FLOATS:
        return {"weight": _float_tensor(gguf, info)}
    if info.kind not in QUANT_TYPES:
        raise ModelFormatError(f"{gguf.path.name}: tensor {info.name!r} has type {info.kind}")
    decoder, bits, block_bytes = QUANT_TYPES[info.kind]
    per_block = 256 if info.kind in K_TYPES else GROUP
    cols = info.shape[-1]
    if cols % per_block:
        raise ModelFormatError(f"{info.name}: rows of {cols} do not fill {info.kind} blocks")
    rows = element_count(info) // cols
    raw = tensor_bytes(gguf, info, rows * cols // per_block * block_bytes)
    raw = raw.reshape(rows, cols // per_block * block_bytes)
    chunks = [
        _affine(decoder, bits, raw[i : i + _ROWS_PER_CHUNK], block_bytes)
        for i in range(0, rows, _ROWS_PER_CHUNK)
    ]
    packed, scales, biases = (np.concatenate(part) for part in zip(*chunks, strict=True))
    scales, biases = scales.astype(scale_dtype), biases.astype(scale_dtype)
    triplet = {"weight": mx.array(packed), "scales": mx.array(scales), "biases": mx.array(biases)}
    if len(info.shape) == 3:
        return {part: a.reshape(*info.shape[:-1], a.shape[-1]) for part, a in triplet.items()}
    if len(info.shape) != 2:
        bits_used = bits or REQUANT_BITS
        flat = mx.dequantize(*triplet.values(), group_size=GROUP, bits=bits_used)
        return {"weight": flat.reshape(info.shape)}
    return triplet


def pack_codes(q: np.ndarray, bits: int) -> np.ndarray:
    """``(rows, cols)`` codes < 2**bits -> MLX's packed ``(rows, cols * bits / 32)`` uint32."""
    rows, cols = q.shape
    octets = q.reshape(rows, cols // 8, 8)
    word = np.zeros((rows, cols // 8), dtype=np.uint64)
    for k in range(8):
        word |= octets[:, :, k].astype(np.uint64) << np.uint64(bits * k)
    packed = word.view(np.uint8).reshape(rows, cols // 8, 8)[:, :, :bits]
    return np.ascontiguousarray(packed).reshape(rows, -1).view(np.uint32)


def requantize(values: np.ndarray, bits: int = REQUANT_BITS) -> tuple[np.ndarray, ...]:
    """Float ``(n, 32)`` groups -> min/max affine (codes, scale, bias); error <= scale / 2."""
    lo, hi = values.min(axis=1), values.max(axis=1)
    scale = (hi - lo) / np.float32(2**bits - 1)
    inv = np.divide(1, scale, out=np.zeros_like(scale), where=scale > 0)
    q = np.clip(np.rint((values - lo[:, None]) * inv[:, None]), 0, 2**bits - 1)
    return q.astype(np.uint8), scale, lo


def _affine(decoder, bits: int | None, raw: np.ndarray, block_bytes: int) -> tuple[np.ndarray, ...]:
    rows = raw.shape[0]
    decoded = decoder(np.ascontiguousarray(raw).reshape(-1, block_bytes))
    if bits is None:  # float values: 16-wide sub-blocks, re-quantised
        q, scale, bias = requantize(decoded.reshape(-1, GROUP).astype(np.float32))
        bits = REQUANT_BITS
    else:
        q, scale, bias = decoded
    packed = pack_codes(q.reshape(rows, -1), bits)
    scale, bias = (a.reshape(rows, -1).astype(np.float32) for a in (scale, bias))
    return packed, scale, bias


def _float_tensor(gguf: GGUFFile, info: TensorInfo) -> mx.array:
    dtype, size = _FLOATS[info.kind]
    raw = tensor_bytes(gguf, info, element_count(info) * size)
    values = np.array(raw.view(dtype).reshape(info.shape))
    if info.kind == "BF16":
        return mx.array(values).view(mx.bfloat16)
    return mx.array(values)


def load_tensors(gguf: GGUFFile) -> dict[str, mx.array]:
    """Every tensor, quantised ones as ``name.weight`` / ``.scales`` / ``.biases`` triplets."""
    tensors, scale_dtype = {}, scale_dtype_of(gguf)
    for info in gguf.tensors:
        module = info.name.removesuffix(".weight")
        for part, array in load_tensor(gguf, info, scale_dtype).items():
            tensors[info.name if part == "weight" else f"{module}.{part}"] = array
    return tensors


def scale_dtype_of(gguf: GGUFFile) -> type:
    """float32 where a K-quant needs it for exactness, else float16 (exact for 32-value blocks)."""
    return np.float32 if any(info.kind in K_TYPES for info in gguf.tensors) else np.float16
