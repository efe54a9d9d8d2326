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
    # a prompt prefilled together with others lets a hit shorter than this go and prefills
    # whole (0: every hit is kept). One row holding KV sends its group through the merged-cache
    # path (engine.runner); on the CPU a short hit still paid (the real SmolLM2 over HTTP at 16
    # streams made 0.87x with hits under 128 tokens let go), on CUDA it is being measured
    # (docs/benchmarks.md). A prompt prefilled alone keeps any hit.
    min_reuse_tokens: int = 0
    # prompts prefilled together: where every hit is at most this many tokens over the least KV a
    # row of the group holds, each gives the excess up (all of it where a row holds none), so the
    # rows start level (engine.prefix align_hits). A ragged group is padded, masked and rolled,
    # and on CUDA a group with one row a token longer than the rest took a second (a 1B model,
    # 64 streams, 2026-12-06: docs/benchmarks.md). 0: every hit is kept whole.
    align_tokens: int = 64

    def __post_init__(self) -> None:
        for name in ("min_reuse_tokens", "align_tokens"):
            if getattr(self, name) < 0:
                raise ValueError(f"prefix-cache {name} must be at least 0, got {getattr(self, name)}")
        if self.bits not in (0, 4, 8):
            raise ValueError(f"prefix-cache bits must be 0 (off), 4 or 8, got {self.bits}")
