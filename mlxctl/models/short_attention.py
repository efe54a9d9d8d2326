"""Attention for short multi-token passes on CUDA, without a kernel built per key length.

MLX's CUDA backend (0.32) runs one-query attention (a decode step) in a vector kernel made once,
but attention with more than one query through cuDNN, whose execution graph is built for each
(queries, keys) shape and takes about 40 ms to build (measured on an H100, Llama-3.2-1B shape:
a 9-token pass over a cache that grows by the tokens it accepts cost 43 ms, over a cache of a
fixed length 3.9 ms; `scripts/probe_verify.py`, docs/benchmarks.md). A speculative verify pass
is such a pass, and its cache length is new every step, so each one paid for a build.

Here a pass of at most ``MAX_QUERIES`` queries on CUDA is computed as plain matmuls and a
softmax (the same arithmetic, kernels that take any shape). Prefill passes pay the same build
for every new (rows, queries, keys) shape, and a server sees many: prompt lengths, prefix-cache
hits and how many prompts arrive together all vary (an H100 measured ~60 ms for the first pass
of each new shape against 5-18 ms once built, `scripts/probe_prefill.py`). So a longer pass whose
shape has not been seen before also goes unfused when its score array is small enough
(``MAX_UNFUSED_SCORES``; about 25 ms on first use), and the fused call takes the shape from its
second pass on, when building it is likely to pay. One query, attention sinks and every other
backend keep MLX's fused call. It is installed once, on CUDA only, when a model is loaded
(generation.py).
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx

MAX_QUERIES = 32  # a verify pass is the draft plus one; prefill chunks are longer
MAX_UNFUSED_SCORES = 1 << 28  # score elements (rows x heads x queries x keys) a first-seen longer pass may build
MAX_SHAPES = 1 << 16  # shapes remembered (forgotten all at once past this)
_seen: set[tuple] = set()

_FUSED = mx.fast.scaled_dot_product_attention


def unfused_attention(q: mx.array, k: mx.array, v: mx.array, scale: float, mask: Any = None) -> mx.array:
    """softmax(q k^T * scale + mask) v over (batch, heads, positions, dim) arrays, with grouped
    key/value heads; ``mask`` as MLX takes it: None, "causal" (the queries are the last
    positions), a boolean array (True: attend) or an additive one, broadcastable to
    (batch, heads, queries, keys)."""
    b, heads, n, dim = q.shape
    kv_heads, keys = k.shape[1], k.shape[2]
    groups = heads // kv_heads
    scores = (q * scale).reshape(b, kv_heads, groups, n, dim) @ mx.expand_dims(k, 2).swapaxes(-1, -2)
    if isinstance(mask, str):  # query i sits at position keys - n + i
        mask = mx.arange(keys - n, keys)[:, None] >= mx.arange(keys)[None]
    if mask is not None:
        if mask.ndim == 4:  # (batch, heads or 1, queries, keys): heads split like the queries
            mask = mask.reshape(mask.shape[0], kv_heads, groups, n, keys) if mask.shape[1] == heads \
                else mx.expand_dims(mask, 2)
        if mask.dtype == mx.bool_:
            scores = mx.where(mask, scores, mx.array(-float("inf"), scores.dtype))
        else:
            scores = scores + mask.astype(scores.dtype)
    weights = mx.softmax(scores, axis=-1, precise=True)
    return (weights @ mx.expand_dims(v, 2)).reshape(b, heads, n, v.shape[-1])


def wants_unfused(queries: int, sinks: Any) -> bool:
    return 1 < queries <= MAX_QUERIES and sinks is None


def first_seen(q: mx.array, k: mx.array, mask: Any, sinks: Any) -> bool:
    """A pass longer than ``MAX_QUERIES`` whose shape (and mask's) the fused call has not met,
    small enough to compute unfused; it is remembered, so the next pass of that shape is fused."""
    b, heads, queries, _ = q.shape
    if queries <= MAX_QUERIES or sinks is not None or b * heads * queries * k.shape[2] > MAX_UNFUSED_SCORES:
        return False
    shape = (q.shape, k.shape, q.dtype, mask if isinstance(mask, str) or mask is None else (mask.shape, mask.dtype))
    if shape in _seen:
        return False
    if len(_seen) >= MAX_SHAPES:
        _seen.clear()
    _seen.add(shape)
    return True


def _attention(q: mx.array, k: mx.array, v: mx.array, *, scale: float, mask: Any = None,
               sinks: Any = None, **kwargs: Any) -> mx.array:
    if not kwargs and (wants_unfused(q.shape[2], sinks) or first_seen(q, k, mask, sinks)):
        return unfused_attention(q, k, v, scale, mask)
    return _FUSED(q, k, v, scale=scale, mask=mask, sinks=sinks, **kwargs)


def install(backend: str) -> bool:
    """On CUDA, route short multi-query attention through :func:`unfused_attention` (once; a
    no-op elsewhere). True when it is in place."""
    if backend != "cuda":
        return False
    mx.fast.scaled_dot_product_attention = _attention
    return True
