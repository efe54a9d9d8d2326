"""Reading the engine from the event loop: queue snapshots and memory figures.

The engine thread mutates its queues while we read them, so a snapshot is retried when a
queue changes under it; memory figures are MLX's allocator counters read from this thread,
so they are approximate (a step old at most).
"""

from __future__ import annotations

import os

from mlxctl.engine.engine import Engine

EMPTY = {"steps": 0, "batch_size": 0, "kv_bytes": 0, "waiting": [], "prefilling": [], "running": []}


def engine_stats(engine: Engine, attempts: int = 5) -> dict:
    """``engine.stats()``, or the empty figures before the model has loaded."""
    if engine.model is None:
        return dict(EMPTY)
    for _ in range(attempts - 1):
        try:
            return engine.stats()
        except RuntimeError:  # "deque mutated during iteration": the engine stepped meanwhile
            continue
    return engine.stats()


def memory() -> dict:
    """MLX's active, peak and cache bytes (zeros on backends that do not count them)."""
    import mlx.core as mx

    return {"active_bytes": mx.get_active_memory(), "peak_bytes": mx.get_peak_memory(),
            "cache_bytes": mx.get_cache_memory(), "limit_bytes": kv_budget()}


def kv_budget() -> int:
    """The memory the KV cache can grow into: MLX's limit, else the machine's RAM."""
    import mlx.core as mx

    return mx.get_memory_limit() or physical_memory()


def physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0
