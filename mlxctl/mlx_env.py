"""Environment defaults for MLX, set before it does any work in the process (MLX reads them when
it builds the objects they configure).

``MLX_ENABLE_CACHE_THRASHING_CHECK``: MLX's CUDA backend keeps built cuDNN attention graphs in
a cache of 256 (``MLX_CUDA_SDPA_CACHE_SIZE``) and, with this check on (its default), raises
"Cache thrashing is happening" once the cache has missed more than twice its size in a process
(mlx ``backend/cuda/lru_cache.h``). A daemon serving prompts of many lengths meets a new prefill
shape with most requests, so it would fail every new shape after its 512th. With the check off
an evicted graph is built again. Other backends never read it.
"""

from __future__ import annotations

import os

THRASHING_CHECK = "MLX_ENABLE_CACHE_THRASHING_CHECK"


def set_defaults() -> None:
    """mlxctl's defaults for MLX's environment, each only where the environment has none."""
    os.environ.setdefault(THRASHING_CHECK, "0")
