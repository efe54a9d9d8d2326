"""PrefixConfig: prefix-cache settings (importable without MLX, for the CLI)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PrefixConfig:
    enabled: bool = True
    block_size: int = 64  # tokens per block
    max_bytes: int = 0  # 0: a tenth of physical memory, at most 4 GiB
    bits: int = 0  # 0: blocks keep the model's KV dtype; 8 or 4: quantised (smaller, not bit-exact)
    cache_dir: str | None = None  # the disk tier's directory; None: memory only
    disk_max_bytes: int = 0  # 0: a tenth of the free space on the disk, at most 20 GiB

    def __post_init__(self) -> None:
        if self.bits not in (0, 4, 8):
            raise ValueError(f"prefix-cache bits must be 0 (off), 4 or 8, got {self.bits}")
