"""Parameter counts and the quantisation summary of a safetensors tensor table.

Packed quantised weights (MLX's uint32 words with scales and biases, GPTQ / AWQ ``qweight``)
count the logical parameters of the matrix they stand for.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from math import prod
from typing import TYPE_CHECKING

from mlxctl.models.inspect_facts import DTYPE_BYTES, _tally

if TYPE_CHECKING:
    from mlxctl.models.inspect_safetensors import TensorInfo

_ELEMENT_BITS = {"uint32": 32, "int32": 32, "uint16": 16, "uint8": 8, "int8": 8}
_QUANT_OVERHEAD = ("scales", "biases")
_SKIP_SUFFIXES = ("weight_scale_inv", "weight_scale", "input_scale", "qzeros", "g_idx")


@dataclass
class _Counted:
    parameters: int
    dtype: str | None
    quantization: dict | None
    types: dict[str, dict]


def _count_parameters(tensors: Mapping[str, TensorInfo], quant: dict | None) -> _Counted:
    """Logical parameters: packed quantised weights count as the matrix they stand for."""
    packed = {n[: -len(".scales")] for n in tensors if n.endswith(".scales")}
    packed = {m for m in packed if f"{m}.weight" in tensors}
    types: dict[str, dict] = {}
    floats: Counter[str] = Counter()
    bits_seen: Counter[int] = Counter()
    total = 0
    for name, info in tensors.items():
        module, _, leaf = name.rpartition(".")
        if module in packed and leaf in _QUANT_OVERHEAD:
            floats[info.dtype] += prod(info.shape)
            continue
        if (counted := _tensor_count(name, info, tensors, packed, quant)) is None:
            continue
        count, label, bits = counted
        if bits is not None:
            bits_seen[bits] += 1
        if label in DTYPE_BYTES:  # a float tensor
            floats[label] += count
        total += count
        _tally(types, label, count)
    dtype = floats.most_common(1)[0][0] if floats else None
    return _Counted(total, dtype, _quant_summary(quant, bits_seen, len(packed)), types)


def _tensor_count(
    name: str,
    info: TensorInfo,
    tensors: Mapping[str, TensorInfo],
    packed: set[str],
    quant: dict | None,
) -> tuple[int, str, int | None] | None:
    """(logical parameters, tensor_types label, packed bits) of a weight; None if not one."""
    module, _, leaf = name.rpartition(".")
    if name.endswith(_SKIP_SUFFIXES):
        return None
    if module in packed and leaf == "weight":
        count, bits = _packed_count(module, info, tensors[f"{module}.scales"], quant)
        return count, f"{bits}-bit", bits
    if leaf == "qweight" and quant and quant.get("bits"):  # GPTQ / AWQ: [in * bits / 32, out]
        return info.shape[0] * 32 // int(quant["bits"]) * prod(info.shape[1:]), "gptq", None
    if info.dtype in DTYPE_BYTES:
        return prod(info.shape), info.dtype, None
    return None  # integer buffers (position ids, ...) are not parameters


def _packed_count(module: str, weight: TensorInfo, scales: TensorInfo, quant: dict | None):
    """(logical parameters, bits) of an MLX packed weight (uint32 words) and its scales."""
    group_size, bits = _module_quant(quant, module)
    element_bits = _ELEMENT_BITS.get(weight.dtype, 32)
    packed_in = weight.shape[-1] * element_bits
    if group_size:
        n_in = scales.shape[-1] * group_size
    elif bits:
        n_in = packed_in // bits
    else:  # no config: MLX's default group size
        n_in = scales.shape[-1] * 64
    rows = prod(weight.shape[:-1])
    return rows * n_in, round(packed_in / n_in) if n_in else 0


def _module_quant(quant: dict | None, module: str) -> tuple[int | None, int | None]:
    if not quant:
        return None, None
    override = quant.get(module)
    if not isinstance(override, dict) and "." in module:
        override = quant.get(module.split(".", 1)[1])  # language_model.model.x -> model.x
    source = override if isinstance(override, dict) else quant
    group_size, bits = source.get("group_size"), source.get("bits")
    return (int(group_size) if group_size else None), (int(bits) if bits else None)


def _quant_summary(quant: dict | None, bits_seen: Counter[int], packed: int) -> dict | None:
    if not quant and not packed:
        return None
    quant = quant or {}
    summary = {
        "method": quant.get("quant_method") or "mlx",
        "mode": quant.get("mode", "affine") if not quant.get("quant_method") else None,
        "bits": quant.get("bits"),
        "group_size": quant.get("group_size"),
        "overrides": {
            module: {k: v for k, v in value.items() if k in ("bits", "group_size", "mode")}
            for module, value in quant.items()
            if isinstance(value, dict)
        },
        "skipped": sorted(m for m, v in quant.items() if v is False),
        "quantized_tensors": packed,
        "bits_seen": {str(b): n for b, n in sorted(bits_seen.items())},
    }
    if packed and not quant:
        summary["note"] = "no quantization in config.json; group size 64 assumed"
    return {k: v for k, v in summary.items() if v is not None}
