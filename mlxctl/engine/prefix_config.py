"""PrefixConfig: prefix-cache settings (importable without MLX, for the CLI)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PrefixConfig:
    enabled: bool = True
    block_size: int = 64  # tokens per block
    max_bytes: int = 0  # 0: a tenth of physical memory, at most 4 GiB
