"""Attention for short multi-token passes on CUDA, without a kernel built per key length.

MLX's CUDA backend (0.32) runs one-query attention (a decode step) in a vector kernel made once,
but attention with more than one query through cuDNN, whose execution graph is built for each
(queries, keys) shape and takes about 40 ms to build (measured on an H100, Llama-3.2-1B shape:
a 9-token pass over a cache that grows by the tokens it accepts cost 43 ms, over a cache of a
fixed length 3.9 ms; `scripts/probe_verify.py`, docs/benchmarks.md). A speculative verify pass
is such a pass, and its cache length is new every step, so each one paid for a build.

Here a pass of at most ``MAX_QUERIES`` queries on CUDA is computed as plain matmuls and a
softmax (the same arithmetic, kernels that take any shape); longer passes (prefill chunks), one
query, attention sinks and every other backend keep MLX's fused call. It is installed once, on
CUDA only, when a model is loaded (generation.py).
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx

MAX_QUERIES = 32  # a verify pass is the draft plus one; prefill chunks are longer
MAX_SCORES = 1 << 27  # score elements an unfused pass may build (512 MiB in float32)

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
        if mask.dtype == mx.bool_:  # the lowest finite value, not -inf: a query that may see no key
            # (a left-padding position of a batched prefill) must not become NaN, as MLX's fused
            # call keeps it finite: its values feed the next layer's keys, where 0 x NaN is NaN
            scores = mx.where(mask, scores, mx.array(mx.finfo(scores.dtype).min, scores.dtype))
        else:
            scores = scores + mask.astype(scores.dtype)
    weights = mx.softmax(scores, axis=-1, precise=True)
    return (weights @ mx.expand_dims(v, 2)).reshape(b, heads, n, v.shape[-1])


def wants_unfused(queries: int, sinks: Any, scores: int = 0) -> bool:
    """A short pass (2 to ``MAX_QUERIES`` queries, no attention sinks) whose score array
    (rows x heads x queries x keys elements) is at most ``MAX_SCORES``: over a very long context
    the unfused pass would hold gigabytes that the fused one never builds."""
    return 1 < queries <= MAX_QUERIES and sinks is None and scores <= MAX_SCORES


def _attention(q: mx.array, k: mx.array, v: mx.array, *, scale: float, mask: Any = None,
               sinks: Any = None, **kwargs: Any) -> mx.array:
    b, heads, queries, _ = q.shape
    if not kwargs and wants_unfused(queries, sinks, b * heads * queries * k.shape[2]):
        return unfused_attention(q, k, v, scale, mask)
    return _FUSED(q, k, v, scale=scale, mask=mask, sinks=sinks, **kwargs)


def install(backend: str) -> bool:
    """On CUDA, route short multi-query attention through :func:`unfused_attention` (once; a
    no-op elsewhere). True when it is in place."""
    if backend != "cuda":
        return False
    mx.fast.scaled_dot_product_attention = _attention
    return True
