"""KVQuant: ``--kv-bits`` / ``--kv-group-size`` (importable without MLX, for the CLI)."""

from __future__ import annotations

from dataclasses import dataclass

from mlxctl.errors import BadInputError

BITS = (4, 8)
GROUP_SIZES = (32, 64, 128)


@dataclass(frozen=True)
class KVQuant:
    """``--kv-bits`` / ``--kv-group-size``: 0 bits keeps KV in the model's dtype."""

    bits: int = 0
    group_size: int = 64
    dequantize_attention: bool = False  # set at load where MLX cannot attend over quantised KV (kv/quantized.py)

    def __post_init__(self) -> None:
        if self.bits not in (0, *BITS):
            raise BadInputError(f"--kv-bits must be 8 or 4 (or 0 for none), not {self.bits}")
        if self.group_size not in GROUP_SIZES:
            raise BadInputError(f"--kv-group-size must be 32, 64 or 128, not {self.group_size}")

    @property
    def enabled(self) -> bool:
        return self.bits > 0

    def check_head_dim(self, head_dim: int) -> None:
        if self.enabled and head_dim % self.group_size:
            raise BadInputError(f"--kv-group-size {self.group_size} does not divide this model's head dimension "
                                f"({head_dim})", hint="pick a group size that divides it (32, 64 or 128)")

    def bytes_per_value(self, dtype_bytes: int) -> float:
        """Bytes one cached key or value element costs: packed bits plus a scale and a bias (in
        the model's dtype) per group."""
        if not self.enabled:
            return float(dtype_bytes)
        return self.bits / 8 + 2 * dtype_bytes / self.group_size
