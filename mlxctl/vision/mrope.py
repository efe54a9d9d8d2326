"""Qwen2.5-VL's 3-D rotary positions (mrope) for a text tower that mlx-lm runs with 1-D RoPE.

Each prompt position has a (t, h, w) position. Text has t = h = w = one counter, and there mrope
*is* ordinary RoPE. An image of an h x w grid of merged patches starts at the counter ``b``: its
patch (row, col) sits at (b, b + row, b + col), and the text after it starts at
b + max(h, w). So a row's positions fall behind its token count by a fixed ``delta`` after its
last image (sum over its images of max(h, w) - h * w): decoding, a row's next position is its
KV cache offset + delta, per row of a batch.

The frequencies of a head are split into three sections (``mrope_section``, e.g. 16/24/24 of 64):
the first rotates by t, the next by h, the last by w (Qwen2.5-VL's chunked layout), or, for
Qwen3-VL's interleaved one (24/20/20), frequency i rotates by h when i % 3 == 1 and
i < 3 * sections[1], by w when i % 3 == 2 and i < 3 * sections[2], else by t. q and k pair
dimension i with i + head_dim/2, as mlx-lm's RoPE with traditional=False does.

:class:`PositionedRoPE` replaces each attention layer's RoPE. What it applies is set on its
shared :class:`RopeContext` around a forward pass (engine thread only): a prompt chunk of a
request with images (its :class:`ImageLayout`), the per-row deltas of a decode step, or nothing
(plain RoPE: every text-only pass).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import mlx.core as mx
import mlx.nn as nn
import numpy as np


@dataclass(frozen=True)
class ImageLayout:
    """A prompt's images as the positions see them: (span start, grid rows, grid cols) each, in
    prompt order (rows x cols merged patches, the span's length)."""

    images: tuple[tuple[int, int, int], ...]

    @property
    def delta(self) -> int:
        """Position minus token index, after the last image."""
        return sum(max(h, w) - h * w for _, h, w in self.images)

    def positions(self, start: int, n: int) -> np.ndarray:
        """(3, n) int32 (t, h, w) positions of prompt indices ``start .. start+n``."""
        idx = np.arange(start, start + n)
        out = np.broadcast_to(idx, (3, n)).copy()
        shift = 0  # position - index before the image being looked at
        for s, h, w in self.images:
            inside = (idx >= s) & (idx < s + h * w)
            k = idx[inside] - s
            base = s + shift
            out[0, inside] = base
            out[1, inside] = base + k // w
            out[2, inside] = base + k % w
            shift += max(h, w) - h * w
            out[:, idx >= s + h * w] = idx[idx >= s + h * w] + shift
        return out.astype(np.int32)


class RopeContext:
    """What the next forward pass rotates by: a layout (one request's prompt chunk), per-row
    deltas (a decode step), or neither (plain RoPE)."""

    def __init__(self):
        self.layout: ImageLayout | None = None
        self.deltas: mx.array | None = None
        self.deepstack: tuple[int, list] | None = None  # (chunk start, per level (n, hidden)): deepstack.py
        self._rotations: dict = {}  # (offset, n) -> what every layer rotates that pass by

    @contextmanager
    def prompt(self, layout: ImageLayout | None, deepstack: tuple[int, list] | None = None) -> Iterator[None]:
        self.layout, self.deepstack = layout, deepstack
        try:
            yield
        finally:
            self.layout = self.deepstack = None
            self._rotations.clear()

    def rotation(self, offset: int, n: int, make: Any) -> Any:
        """``make(positions)`` for this pass, worked out once for all the layers."""
        key = (offset, n)
        if key not in self._rotations:
            self._rotations[key] = make(self.layout.positions(offset, n))
        return self._rotations[key]

    @contextmanager
    def rows(self, deltas: Sequence[int]) -> Iterator[None]:
        self.deltas = mx.array(list(deltas), dtype=mx.int32) if any(deltas) else None
        try:
            yield
        finally:
            self.deltas = None


class PositionedRoPE(nn.Module):
    """mlx-lm's RoPE of one attention layer, taking 3-D positions when its context has them."""

    def __init__(self, rope: Any, context: RopeContext, sections: Sequence[int], head_dim: int,
                 interleaved: bool = False):
        super().__init__()
        self.rope = rope
        self._context = context
        base = getattr(rope, "base", 10000.0)
        inv_freq = 1.0 / (base ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
        self._inv_freq = inv_freq.astype(np.float32)
        self._section_of = _sections(sections, head_dim // 2, interleaved)  # frequency -> t/h/w

    def __call__(self, x: mx.array, offset: Any = 0) -> mx.array:
        ctx = self._context
        if ctx.layout is not None and isinstance(offset, int):
            rotation = ctx.rotation(offset, x.shape[-2], self._rotation)
            if isinstance(rotation, int):  # text only: plain RoPE from its position, exactly
                return self.rope(x, offset=rotation)
            return _rotate(x, *rotation)
        if ctx.deltas is not None:
            return self.rope(x, offset=offset + ctx.deltas)
        return self.rope(x, offset=offset)

    def _rotation(self, positions: np.ndarray) -> int | tuple[mx.array, mx.array]:
        """The first position of a text-only run, else the (n, half) cos and sin."""
        if (positions[0] == positions[1]).all() and (positions[0] == positions[2]).all() and \
                (np.diff(positions[0]) == 1).all():
            return int(positions[0, 0])
        chosen = positions[self._section_of]  # (half, n): each frequency's t, h or w position
        angles = mx.array((chosen.T * self._inv_freq).astype(np.float32))  # (n, half)
        return mx.cos(angles), mx.sin(angles)


def _rotate(x: mx.array, cos: mx.array, sin: mx.array) -> mx.array:
    """Split-halves rotation of (..., n, head_dim) by (n, head_dim/2) angles."""
    half = x.shape[-1] // 2
    a, b = x[..., :half].astype(mx.float32), x[..., half:].astype(mx.float32)
    return mx.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1).astype(x.dtype)


def _sections(sections: Sequence[int], half: int, interleaved: bool) -> np.ndarray:
    """Which of t (0), h (1), w (2) each of a head's ``half`` frequencies rotates by."""
    if not interleaved:
        return np.repeat(np.arange(3), list(sections))[:half]
    i = np.arange(half)
    out = np.zeros(half, dtype=np.int64)
    out[(i % 3 == 1) & (i < 3 * sections[1])] = 1
    out[(i % 3 == 2) & (i < 3 * sections[2])] = 2
    return out


def install(text_model: Any, sections: Sequence[int], interleaved: bool = False) -> RopeContext:
    """Put a PositionedRoPE in every attention layer of the text tower; returns their context."""
    context = RopeContext()
    for layer in text_model.layers:
        attn = layer.self_attn
        if getattr(attn.rope, "traditional", False):
            raise ValueError("mrope needs the text tower's RoPE in the split-halves layout (rope_traditional false)")
        attn.rope = PositionedRoPE(attn.rope, context, sections, attn.rope.dims, interleaved)
    return context
