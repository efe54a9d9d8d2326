"""One vectorised draw for the rows of a batch that need nothing of their own.

A row whose request has no seed, no logprobs, no logit_bias, no penalties and no grammar mask
needs only its temperature, top-k, top-p and min-p: those rows are sampled together, each with
its own settings, in one graph of a fixed size, instead of a dozen ops per row (at 64 rows that
was about 800 kernels a step). The filters are the per-row ones of :mod:`engine.sampling`,
written over a (B, V) array: temperature, then top-k (ties with the k-th kept), top-p over what
top-k left, min-p, then a categorical draw; a greedy row takes the argmax of its raw logits.
Seeded rows keep their own keys (their tokens must not depend on what shares the batch).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import mlx.core as mx


def filtered_logits(logits: mx.array, params: Sequence) -> mx.array:
    """(B, V) float32 ``logits`` scaled by each row's temperature and filtered by its top-k,
    top-p and min-p (``params[i]``: a SamplingParams): dropped tokens are ``-inf``."""
    vocab = logits.shape[-1]
    temps = [p.temperature if p.temperature > 0 else 1.0 for p in params]
    scaled = logits / mx.array(temps, dtype=mx.float32)[:, None]
    ks = [p.top_k if 0 < p.top_k < vocab else 0 for p in params]
    tops = [p.top_p for p in params]
    if any(ks) or any(t < 1 for t in tops):
        descending = -mx.sort(-scaled, axis=-1)
        if any(ks):
            kth = mx.take_along_axis(descending, mx.array([k - 1 if k else vocab - 1 for k in ks])[:, None], axis=-1)
            scaled = mx.where(scaled < kth, -math.inf, scaled)
            beyond = mx.arange(vocab)[None, :] >= mx.array([k or vocab for k in ks])[:, None]
            descending = mx.where(beyond, -math.inf, descending)  # top-p sees only top-k's survivors
        if any(t < 1 for t in tops):
            probs = mx.softmax(descending, axis=-1)
            mass_before = mx.cumsum(probs, axis=-1) - probs
            limit = mx.array([t if t < 1 else 2.0 for t in tops], dtype=mx.float32)[:, None]  # 2: keep all
            kept = mx.sum(mass_before < limit, axis=-1, keepdims=True)  # >= 1
            threshold = mx.take_along_axis(descending, kept - 1, axis=-1)
            scaled = mx.where(scaled < threshold, -math.inf, scaled)
    floors = [math.log(p.min_p) if p.min_p > 0 else -math.inf for p in params]
    if any(p.min_p > 0 for p in params):
        floor = mx.max(scaled, axis=-1, keepdims=True) + mx.array(floors, dtype=mx.float32)[:, None]
        scaled = mx.where(scaled < floor, -math.inf, scaled)
    return scaled


def sample_shared(logits: mx.array, params: Sequence) -> mx.array:
    """(B,) int32 tokens, one per row of (B, V) ``logits``, drawn from MLX's global key."""
    logits = logits.astype(mx.float32)
    greedy = [p.is_greedy for p in params]
    if all(greedy):
        return mx.argmax(logits, axis=-1).astype(mx.int32)
    drawn = mx.random.categorical(filtered_logits(logits, params), axis=-1)
    if any(greedy):
        drawn = mx.where(mx.array(greedy), mx.argmax(logits, axis=-1), drawn)
    return drawn.astype(mx.int32)
