"""Qwen3-VL's deepstack: features from inner layers of the vision tower, added to the text
tower's hidden states at the image positions after each of its first layers (one level a layer).

:class:`DeepstackLayer` wraps one decoder layer of mlx-lm's text tower. Its level's additions for
the prompt chunk being run are set on the shared :class:`~mlxctl.vision.mrope.RopeContext`
(``deepstack``: the chunk's first prompt index and, per level, (chunk length, hidden) arrays, zero
at text positions); the layer's KV cache offset says which rows of it this pass covers (a chunk
may run as a fill pass and a last-token pass). Decode steps and text-only passes add nothing.
"""

from __future__ import annotations

from typing import Any

import mlx.nn as nn


class DeepstackLayer(nn.Module):
    def __init__(self, layer: Any, level: int, context: Any):
        super().__init__()
        self.layer = layer
        self._level, self._context = level, context

    @property
    def self_attn(self) -> Any:
        return self.layer.self_attn

    def __call__(self, x: Any, mask: Any = None, cache: Any = None) -> Any:
        offset = cache.offset if cache is not None else 0
        out = self.layer(x, mask, cache)
        pending = self._context.deepstack
        if pending is None or not isinstance(offset, int):
            return out
        start, levels = pending
        add = levels[self._level][offset - start : offset - start + x.shape[1]]
        return out + add[None].astype(out.dtype)


def install(text_model: Any, levels: int, context: Any) -> None:
    """Wrap the first ``levels`` decoder layers of the text tower."""
    layers = text_model.layers  # mlx-lm's property: the model's own list
    for i in range(levels):
        layers[i] = DeepstackLayer(layers[i], i, context)
