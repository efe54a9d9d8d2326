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

Prefill passes meet the same per-shape cost: a server's prompts have many lengths, so most
requests bring a new (rows, queries, keys) shape; MLX's limit on that cache is lifted by
mlxctl's environment defaults (mlx_env.py: the CLI sets them at start, and installing here for
library callers). With ``MLXCTL_ATTENTION_BUCKETS=1`` (off by default: not yet measured on a
GPU), a prefill pass also runs on its shape rounded up, queries to a multiple of
``QUERY_BUCKET`` and keys to one of ``KEY_BUCKET``, the padding hidden by the mask, so prompts of
nearby lengths share built graphs.
"""

from __future__ import annotations

import math
import os
import threading
from typing import Any

import mlx.core as mx

from mlxctl import mlx_env

MAX_QUERIES = 32  # a verify pass is the draft plus one; prefill chunks are longer
MAX_SCORES = 1 << 27  # score elements an unfused pass may build (512 MiB in float32)
QUERY_BUCKET = 128  # a bucketed prefill pass's queries: a multiple of this
KEY_BUCKET = 256  # and its keys (the KV cache grows in steps of 256 too)
MEMO_MAX = 1 << 22  # mask elements a bucketed pass keeps for its next layers (8 MiB in bfloat16)
BUCKETS_ENV = "MLXCTL_ATTENTION_BUCKETS"

_FUSED = mx.fast.scaled_dot_product_attention


def causal_mask(queries: int, keys: int) -> mx.array:
    """MLX's "causal" mask as a boolean (queries, keys) array: the queries are the last
    positions, query i at position keys - queries + i, seeing the keys up to its own."""
    return mx.arange(keys - queries, keys)[:, None] >= mx.arange(keys)[None]


def unfused_attention(q: mx.array, k: mx.array, v: mx.array, scale: float, mask: Any = None) -> mx.array:
    """softmax(q k^T * scale + mask) v over (batch, heads, positions, dim) arrays, with grouped
    key/value heads; ``mask`` as MLX takes it: None, "causal" (the queries are the last
    positions), a boolean array (True: attend) or an additive one, broadcastable to
    (batch, heads, queries, keys)."""
    b, heads, n, dim = q.shape
    kv_heads, keys = k.shape[1], k.shape[2]
    groups = heads // kv_heads
    scores = (q * scale).reshape(b, kv_heads, groups, n, dim) @ mx.expand_dims(k, 2).swapaxes(-1, -2)
    if isinstance(mask, str):
        mask = causal_mask(n, keys)
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


def _round_up(n: int, step: int) -> int:
    return -(-n // step) * step


def bucket_rows(rows: int) -> int:
    """A bucketed pass's rows (prompts prefilled together): the next power of two."""
    return 1 << max(0, rows - 1).bit_length()


_memo = threading.local()  # per engine thread: the last pass's mask, as ``bucketed_attention`` made it


def _bucket_bias(mask: Any, n: int, keys: int, shape: tuple[int, int, int, int], dtype: Any) -> mx.array:
    """The additive mask of a bucketed pass of ``shape`` (rows, queries, keys rounded up): the
    given one (None, "causal", boolean or additive, over ``n`` queries and ``keys`` keys) with the
    padded keys hidden and the padded queries and rows seeing every real key. Every layer of a
    forward pass hands over the same mask, so the last one made is kept (with the mask it came
    from, so an array's identity cannot be reused) and made again only when that changes: its
    handful of operations a layer cost more than the attention of a short prompt on CUDA."""
    key = (mask if isinstance(mask, str) or mask is None else id(mask), n, keys, shape, dtype)
    last = getattr(_memo, "last", None)
    if last is not None and last[0] == key and (isinstance(mask, str) or last[1] is mask):
        return last[2]
    given, (rows, _, n_all, k_all) = mask, shape
    low = mx.array(mx.finfo(dtype).min, dtype)
    real_key = mx.arange(k_all) < keys
    if isinstance(mask, str):
        mask = causal_mask(n, keys)
    if mask is None:
        bias = mx.where(mx.broadcast_to(real_key, (1, 1, n_all, k_all)), mx.array(0, dtype), low)
    else:
        mask = mask.reshape((1,) * (4 - mask.ndim) + mask.shape)
        bias = mx.where(mask, mx.array(0, dtype), low) if mask.dtype == mx.bool_ else mask.astype(dtype)
        bias = mx.broadcast_to(bias, (*bias.shape[:2], n, keys))
        row_pad = rows - bias.shape[0] if bias.shape[0] > 1 else 0  # a mask per row: the padded rows see all
        bias = mx.pad(bias, [(0, row_pad), (0, 0), (0, n_all - n), (0, k_all - keys)])
        bias = mx.where(real_key, bias, low)
    if bias.size <= MEMO_MAX:  # a long prompt's mask is not held past its pass (its layers' work dwarfs it)
        _memo.last = (key, None if isinstance(given, str) else given, bias)
    return bias


def bucketed_attention(q: mx.array, k: mx.array, v: mx.array, scale: float, mask: Any = None) -> mx.array:
    """MLX's fused attention on the shape rounded up: rows (prompts prefilled together) to a
    power of two, queries to a multiple of ``QUERY_BUCKET``, keys and values to one of
    ``KEY_BUCKET``, zeros in the padding, the padding hidden by one additive mask (what the fused
    call makes of a boolean one; :func:`_bucket_bias`). Padded queries and rows see every real key
    and are dropped from the output; a masked score is the lowest finite value, as
    :func:`unfused_attention` keeps a query that may see no key finite."""
    b, heads, n, _ = q.shape
    keys = k.shape[2]
    rows, n_all, k_all = bucket_rows(b), _round_up(n, QUERY_BUCKET), _round_up(keys, KEY_BUCKET)
    bias = _bucket_bias(mask, n, keys, (rows, heads, n_all, k_all), q.dtype)
    pad = [(0, rows - b), (0, 0), (0, k_all - keys), (0, 0)]
    out = _FUSED(mx.pad(q, [(0, rows - b), (0, 0), (0, n_all - n), (0, 0)]), mx.pad(k, pad), mx.pad(v, pad),
                 scale=scale, mask=bias)
    return out[:b, :, :n]


def wants_buckets(queries: int, sinks: Any, mask_rows: int, keys: int) -> bool:
    """A prefill pass (more than ``MAX_QUERIES`` queries, no attention sinks) whose rounded-up
    mask (``mask_rows``, the given mask's rows times heads or 1, x queries x keys) stays within
    ``MAX_SCORES`` elements, with buckets turned on. (The padded copies of the keys and values,
    about one layer's KV, are not counted.)"""
    return (_BUCKETS and queries > MAX_QUERIES and sinks is None
            and mask_rows * _round_up(queries, QUERY_BUCKET) * _round_up(keys, KEY_BUCKET) <= MAX_SCORES)


def _attention(q: mx.array, k: mx.array, v: mx.array, *, scale: float, mask: Any = None,
               sinks: Any = None, **kwargs: Any) -> mx.array:
    b, heads, queries, _ = q.shape
    if not kwargs and wants_unfused(queries, sinks, b * heads * queries * k.shape[2]):
        return unfused_attention(q, k, v, scale, mask)
    if _BUCKETS and not kwargs:
        mask_rows = 1 if mask is None or isinstance(mask, str) else math.prod(mask.shape[:-2])
        if wants_buckets(queries, sinks, mask_rows, k.shape[2]):
            return bucketed_attention(q, k, v, scale, mask)
    return _FUSED(q, k, v, scale=scale, mask=mask, sinks=sinks, **kwargs)


_BUCKETS = False  # set by install from MLXCTL_ATTENTION_BUCKETS


def install(backend: str) -> bool:
    """On CUDA, route short multi-query attention through :func:`unfused_attention`, prefill
    passes through :func:`bucketed_attention` where ``MLXCTL_ATTENTION_BUCKETS=1``, and turn
    MLX's graph-cache thrashing check off (mlx_env.py; once; a no-op elsewhere). True when it is
    in place."""
    global _BUCKETS
    if backend != "cuda":
        return False
    mlx_env.set_defaults()  # the CLI set them at start; a library caller's first attention is still to come
    _BUCKETS = os.environ.get(BUCKETS_ENV, "0").strip().lower() in ("1", "true", "yes", "on")
    mx.fast.scaled_dot_product_attention = _attention
    return True
