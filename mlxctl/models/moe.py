"""Mixture-of-experts routing: send each token to fewer experts than the model was trained with.

mlx-lm's MoE blocks read their ``top_k`` attribute on every call, so lowering it after loading
changes the routing of every later forward pass: decode gets faster (fewer expert matmuls per
token) at some cost in quality. Dense models have no such blocks; for them this is a no-op.
"""

from __future__ import annotations

from typing import Any, Callable

from mlxctl.errors import BadInputError


def moe_blocks(model: Any) -> list[Any]:
    """Modules that route tokens to experts: an int ``top_k`` beside a ``num_experts``."""
    return [m for m in model.modules()
            if isinstance(getattr(m, "top_k", None), int) and isinstance(getattr(m, "num_experts", None), int)]


def set_moe_top_k(model: Any, k: int, notice: Callable[[str], None] | None = None) -> int:
    """Route every MoE block to ``k`` experts; returns how many blocks changed."""
    blocks = moe_blocks(model)
    if not blocks:
        if notice:
            notice("--moe-top-k has no effect: this is not a mixture-of-experts model")
        return 0
    trained = max(b.top_k for b in blocks)
    if not 1 <= k <= trained:
        raise BadInputError(f"--moe-top-k must be between 1 and the model's {trained} experts per token, got {k}")
    for block in blocks:
        block.top_k = k
    if notice:
        notice(f"routing each token to {k} of {trained} experts in {len(blocks)} MoE blocks")
    return len(blocks)
