"""Prefix reuse: requests start from KV blocks that earlier requests computed.

Glue between the engine and the model-agnostic :class:`PrefixCache`: block payloads are the
per-layer key/value slices of mlx-lm's plain ``KVCache``, copied out of a request's cache once
its prompt is done and concatenated back into a fresh cache (through its public
``update_and_fetch``) when a later prompt starts with the same tokens. Models whose caches are
not plain KV caches (sliding windows, state-space layers) cannot be cut at a block boundary:
for them reuse is off, and ``stats()`` says so.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import KVCache, make_prompt_cache

from mlxctl.engine.kv.prefix_cache import PrefixCache
from mlxctl.engine.prefix_config import PrefixConfig
from mlxctl.engine.request import Request


class KVBlockPayload:
    """One block's keys and values for every layer."""

    def __init__(self, layers: list[tuple[mx.array, mx.array]]):
        self.layers = layers
        self.nbytes = sum(k.nbytes + v.nbytes for k, v in layers)


class PrefixReuse:
    def __init__(self, loaded: Any, config: PrefixConfig):
        self.model = loaded.model
        self.reason = _unsupported_reason(self.model) if config.enabled else "disabled"
        self.enabled = self.reason is None
        budget = config.max_bytes or default_budget()
        self.cache = PrefixCache(config.block_size, budget, fingerprint(loaded)) if self.enabled else None

    def attach(self, req: Request) -> None:
        """Start ``req`` from the longest cached prefix of its prompt (never the last token)."""
        if not self.enabled:
            return
        hit = self.cache.lookup(req.prompt_tokens[:-1])
        if hit.num_tokens == 0:
            return
        req.prefix_blocks, req.cached_tokens = hit.blocks, hit.num_tokens
        req.cache, req.num_prefilled = self._cache_from(hit.blocks), hit.num_tokens

    def remember_tokens(self, tokens: list[int], cache: list[Any]) -> None:
        """Keep the full blocks of ``tokens`` whose KV ``cache`` (plain, per layer) holds."""
        if self.enabled and len(tokens) >= self.cache.block_size:
            self.cache.insert(tokens, lambda start, end: _payload(cache, start, end))

    def forget(self, req: Request) -> None:
        if self.enabled and req.prefix_blocks:
            self.cache.release(req.prefix_blocks)
            req.prefix_blocks = ()

    def clear(self) -> int:
        return self.cache.clear() if self.enabled else 0

    def stats(self) -> dict:
        return {"enabled": self.enabled, "reason": self.reason} | (self.cache.stats() if self.enabled else {})

    def _cache_from(self, blocks) -> list[Any]:
        cache = make_prompt_cache(self.model)
        for i, layer in enumerate(cache):
            keys = mx.concatenate([b.payload.layers[i][0] for b in blocks], axis=2)
            values = mx.concatenate([b.payload.layers[i][1] for b in blocks], axis=2)
            layer.update_and_fetch(keys, values)
        return cache


def _payload(cache: list[Any], start: int, end: int) -> KVBlockPayload:
    layers = [(mx.contiguous(c.keys[..., start:end, :]), mx.contiguous(c.values[..., start:end, :])) for c in cache]
    mx.eval([a for pair in layers for a in pair])
    return KVBlockPayload(layers)


def _unsupported_reason(model: Any) -> str | None:
    kinds = {type(c).__name__ for c in make_prompt_cache(model)}
    return None if kinds == {"KVCache"} else f"cache layers {sorted(kinds)} cannot be cut at block boundaries"


def fingerprint(loaded: Any) -> str:
    """What changes the KV: the model's identity, its config and its weights' dtype."""
    from mlx.utils import tree_flatten

    params = tree_flatten(loaded.model.parameters())
    dtype = str(params[0][1].dtype) if params else ""
    config = json.dumps(getattr(loaded, "config", {}) or {}, sort_keys=True, default=str)
    return hashlib.sha256(f"{loaded.name}|{dtype}|{config}".encode()).hexdigest()


def default_budget() -> int:
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        memory = 8 << 30
    return min(4 << 30, memory // 10)
