"""The memory a model needs (weights + KV cache) against the memory MLX may use here.

Only :func:`memory_limit` imports MLX (and only when called).
"""

from __future__ import annotations

import os

from mlxctl.models.inspect_facts import DTYPE_BYTES, _Facts

ESTIMATE_DTYPES = ("native", "float32", "float16", "bfloat16")
DEFAULT_CONTEXT = 4096  # for the estimate, when the model does not say


def estimate_memory(
    facts: _Facts, context: int | None, batch: int, dtype: str, limit: tuple[int | None, str] | None
) -> dict:
    """Weights + KV cache, in bytes, and whether that fits in ``limit`` (or this machine's)."""
    weights = facts.weights_bytes
    if dtype != "native" and facts.parameters is not None:
        weights = facts.parameters * DTYPE_BYTES[dtype]
    context = context or facts.context_length or DEFAULT_CONTEXT
    per_token = _kv_bytes_per_token(facts, dtype) if facts.decoder else None
    kv = per_token * _kv_positions(facts, context) * batch if per_token is not None else None
    total = None if weights is None else weights + (kv or 0)
    limit_bytes, limit_source = limit if limit is not None else memory_limit()
    return {
        "dtype": dtype,
        "context": context if per_token is not None else None,
        "batch": batch if per_token is not None else None,
        "weights_bytes": weights,
        "kv_bytes_per_token": per_token,
        "kv_cache_bytes": kv,
        "total_bytes": total,
        "limit_bytes": limit_bytes,
        "limit_source": limit_source,
        "fits": None if total is None or limit_bytes is None else total <= limit_bytes,
    }


def _kv_bytes_per_token(facts: _Facts, dtype: str) -> int | None:
    attention = facts.attention
    if not attention or not all(attention.get(k) for k in ("layers", "kv_heads", "head_dim")):
        return None
    element = DTYPE_BYTES.get(dtype) or DTYPE_BYTES.get(facts.dtype or "", 2)
    dims = attention["head_dim"] + attention.get("value_dim", attention["head_dim"])
    return attention["layers"] * attention["kv_heads"] * dims * element


def _kv_positions(facts: _Facts, context: int) -> float:
    """Cached positions per layer, on average: sliding-window layers keep only their window."""
    attention = facts.attention or {}
    window, sliding = attention.get("sliding_window"), attention.get("sliding_layers", 0)
    if not window or not sliding:
        return context
    layers = attention["layers"]
    return ((layers - sliding) * context + sliding * min(window, context)) / layers


def memory_limit() -> tuple[int | None, str]:
    """(bytes MLX may use here, where the number comes from): MLX's limit, else physical RAM."""
    try:
        import mlx.core as mx

        getter = getattr(mx, "get_memory_limit", None) or mx.metal.get_memory_limit
        value = int(getter())
        if value > 0:
            return value, "mlx memory limit"
    except (ImportError, AttributeError, RuntimeError, ValueError):
        pass
    physical = physical_memory()
    return physical, "physical memory" if physical else "unknown"


def physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
