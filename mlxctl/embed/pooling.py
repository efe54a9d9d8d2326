"""Pooling token states into one vector per input, as sentence-transformers' Pooling does.

``hidden`` is ``(batch, length, width)``, ``mask`` is ``(batch, length)`` with 1 on real tokens
(right-padded). Several modes are concatenated in the order given.
"""

from __future__ import annotations

from collections.abc import Sequence

import mlx.core as mx


def pool(hidden: mx.array, mask: mx.array, modes: Sequence[str]) -> mx.array:
    hidden = hidden.astype(mx.float32)
    m = mask.astype(mx.float32)[..., None]
    counts = mx.maximum(m.sum(axis=1), 1e-9)
    parts = []
    for mode in modes:
        if mode == "cls":
            parts.append(hidden[:, 0])
        elif mode == "max":
            parts.append(mx.where(m > 0, hidden, mx.array(-1e9, mx.float32)).max(axis=1))
        elif mode == "mean":
            parts.append((hidden * m).sum(axis=1) / counts)
        elif mode == "mean_sqrt_len":
            parts.append((hidden * m).sum(axis=1) / mx.sqrt(counts))
        elif mode == "weightedmean":
            weights = mx.arange(1, hidden.shape[1] + 1, dtype=mx.float32)[None, :, None] * m
            parts.append((hidden * weights).sum(axis=1) / mx.maximum(weights.sum(axis=1), 1e-9))
        elif mode == "lasttoken":
            last = mx.maximum(mask.astype(mx.int32).sum(axis=1) - 1, 0)
            parts.append(mx.take_along_axis(hidden, last[:, None, None], axis=1)[:, 0])
        else:
            raise ValueError(f"unknown pooling mode {mode!r}")
    return parts[0] if len(parts) == 1 else mx.concatenate(parts, axis=-1)

