"""Prefix reuse: requests start from KV blocks (and checkpoints) that earlier requests computed.

Glue between the engine and the model-agnostic :class:`PrefixCache`: block payloads are the
per-layer key/value slices of mlx-lm's plain ``KVCache``, copied out of a request's cache once
its prompt is done and concatenated back into a fresh cache (through its public
``update_and_fetch``) when a later prompt starts with the same tokens. Blocks can be kept
quantised (8 or 4 bits, per group of the head dimension; a hit then restores an approximation,
so the bit count is part of the fingerprint) and spill to a disk tier when evicted. Under
``--kv-bits`` running requests hold quantised KV already: blocks are slices of it, kept as they
are (never dequantised and quantised again) and filled back as they are.

Models with layers that cannot be cut at a block boundary (sliding windows, state-space or
linear-attention layers) are never trimmed to fake a hit: they are served from checkpoints
(``checkpoints.py``), whole-state snapshots at chosen positions whose plain-KV layers still sit
in blocks. ``stats()`` says which: its ``mode`` is ``blocks`` or ``checkpoints`` (or ``none``
with the ``reason`` when reuse is off).
"""

from __future__ import annotations

import hashlib
import json
import os
from contextlib import contextmanager
from typing import Any, Iterator

import mlx.core as mx
from mlx_lm.models.cache import can_trim_prompt_cache, trim_prompt_cache

from mlxctl.engine.batch import HitCache, StackedRow, uniform_kv
from mlxctl.engine.checkpoints import MARKER, CacheLayout, CheckpointPayload, cut_points, turn_end_ids
from mlxctl.engine.kv import snapshot
from mlxctl.engine.kv.quantized import QuantizedKV, make_cache
from mlxctl.engine.kv_config import KVQuant
from mlxctl.engine.kv.payload import KVBlockPayload
from mlxctl.engine.kv.prefix_cache import PrefixCache
from mlxctl.engine.prefix_config import PrefixConfig
from mlxctl.engine.request import Request
from mlxctl.errors import BadInputError


class _DiskGlue:
    """The disk tier as the prefix cache's lower tier: payloads to and from flat arrays."""

    def __init__(self, disk: Any, reuse: "PrefixReuse"):
        self.disk, self.reuse = disk, reuse

    def load(self, block_hash: bytes, parent: bytes | None, tokens: tuple[int, ...]) -> KVBlockPayload | None:
        found = self.disk.get(block_hash, tokens)
        if found is None or found.parent != parent:
            return None
        r = self.reuse
        try:
            if MARKER in found.arrays:
                return CheckpointPayload.from_arrays(found.arrays, r.block_payload_from)
            return r.block_payload_from(found.arrays)
        except (KeyError, TypeError, ValueError):  # a file of another layout: never served
            return None

    def children(self, parent: bytes | None) -> list[tuple[bytes, tuple[int, ...]]]:
        return self.disk.children(parent)

    def store(self, block: Any) -> None:
        self.disk.put(block.hash, block.parent, block.tokens, block.payload.to_arrays())


class PrefixReuse:
    def __init__(self, loaded: Any, config: PrefixConfig, kv: KVQuant = KVQuant()):
        self.model, self.kv = loaded.model, kv
        self.reason = None if config.enabled else "disabled"
        self.min_reuse = config.min_reuse_tokens
        self.align = config.align_tokens
        self.enabled = self.reason is None
        self.bits, self.group_size, self.dtype, self.num_layers = config.bits, 0, None, 0
        self.disk = None
        self.cache = None
        self._copies: list[mx.array] = []  # blocks' copies not yet started (see ``together``)
        self._together = 0
        self.layout = CacheLayout((), (), ())
        self.turn_ends: frozenset[int] = frozenset()
        if not self.enabled:
            return
        if kv.enabled and config.bits and config.bits != kv.bits:
            raise BadInputError(f"--prefix-cache-bits {config.bits} differs from --kv-bits {kv.bits}: cached blocks "
                                "keep the running requests' KV as it is", hint="leave --prefix-cache-bits out")
        cache = make_cache(self.model, kv)
        self.layout = CacheLayout.of(cache)
        self.turn_ends = turn_end_ids(loaded)
        self.num_layers = len(self.layout.cut)  # the layers a block holds
        self.dtype, head_dim = _kv_shape(self.model, cache, self.layout.cut)
        if kv.enabled:  # blocks are slices of the running requests' quantised KV
            self.bits, self.group_size = kv.bits, kv.group_size
        elif self.bits and head_dim:
            self.group_size = next((g for g in (64, 32) if head_dim % g == 0), 0)
            if not self.group_size:
                raise BadInputError(f"cannot quantise cached KV: head dimension {head_dim} is not a multiple of 32")
        fp = fingerprint(loaded) + (f"|kv{self.bits}bit" if self.bits else "") + \
            (f"|running-kv{kv.bits}g{kv.group_size}" if kv.enabled else "")
        lower = None
        if config.cache_dir:
            from mlxctl.engine.kv.disk import DiskTier

            self.disk = DiskTier(config.cache_dir, config.disk_max_bytes or default_disk_budget(config.cache_dir), fp)
            lower = _DiskGlue(self.disk, self)
        self.cache = PrefixCache(config.block_size, config.max_bytes or default_budget(), fp, lower=lower)

    @property
    def mode(self) -> str:
        if not self.enabled:
            return "none"
        return "checkpoints" if self.layout.needs_checkpoints else "blocks"

    @property
    def checkpoints(self) -> bool:
        """Whether this model is served from checkpoints (see ``checkpoints.py``)."""
        return self.enabled and self.layout.needs_checkpoints

    @property
    def stacks(self) -> bool:
        """Whether blocks are kept as they are, all layers stacked (no checkpoints, no
        quantising): ``remember_tokens`` then takes a ``batch.StackedRow``."""
        return self.enabled and not self.checkpoints and not self.bits

    @contextmanager
    def together(self) -> Iterator[None]:
        """The blocks kept inside start copying in one evaluation when the outermost ``together``
        ends (the engine wraps a step's remembering in one). Each evaluation is a launch on a GPU
        (under CUDA a graph of its own): one a block was most of what keeping a 64-request
        wave's blocks cost on an H100."""
        self._together += 1
        try:
            yield
        finally:
            self._together -= 1
            if not self._together and self._copies:
                copies, self._copies = self._copies, []
                mx.async_eval(copies)  # copied on the device in order; nothing waits for them

    def attach(self, req: Request) -> None:
        """Start ``req`` from the longest cached prefix of its prompt (never the last token)."""
        if not self.enabled:
            return
        tokens, fp = req.prefill_tokens[:-1], self._fp(req)
        hit = self.cache.lookup_checkpoint(tokens, fingerprint=fp) if self.checkpoints else \
            self.cache.lookup(tokens, fingerprint=fp)
        if hit.num_tokens:
            req.prefix_blocks = hit.held
            if req.resume is None:  # a resumed request reports its first attempt's reuse
                req.cached_tokens = hit.num_tokens
                if req.stream is not None:  # what a stream's first events know (Anthropic's message_start)
                    req.stream.cached_tokens = hit.num_tokens
            req.cache, req.num_prefilled = self._cache_from(hit), hit.num_tokens
        req.num_reused = req.num_prefilled
        req.checkpoint_at = \
            cut_points(req.prefill_tokens, req.num_prefilled, self.turn_ends) if self.checkpoints else []

    def let_short_hit_go(self, req: Request) -> bool:
        """A prompt about to be prefilled with others: a hit shorter than ``min_reuse`` tokens
        (``PrefixConfig.min_reuse_tokens``, 0 by default: none) is let go, its blocks released, and the prompt
        prefills whole, as if nothing were cached (its stream's first events then say so). Not
        once part of the prompt ran, nor for a resumed request. True when it let one go."""
        if not (0 < req.num_reused < self.min_reuse) or not _only_hit(req):
            return False
        self._let_go(req)
        return True

    def align_hits(self, reqs: list[Request]) -> None:
        """Prompts about to be prefilled together (``reqs``): where every row holding more KV
        than the least any row holds is a hit at most ``PrefixConfig.align_tokens`` over it,
        each cuts its KV back to that least (lets the hit go where the least is none), so all
        rows hold as many tokens and their merged caches need no left padding; with prompts of
        one length the group then runs unpadded. A ragged group is padded, masked and rolled
        into place (engine.runner ``_tails_logits``), and on CUDA its new shapes cost far more
        than the few tokens run again. Where one row cannot be cut (it ran chunks of its
        prompt, was resumed, or its hit reaches further) nothing is cut: the group stays ragged
        anyway. What a cut hit no longer serves leaves the counts and its usage."""
        if not self.enabled or not self.align or len(reqs) < 2:
            return
        least = min(r.num_prefilled for r in reqs)
        over = [r for r in reqs if r.num_prefilled > least]
        if not over or not all(r.num_prefilled - least <= self.align and _only_hit(r) and
                               (not least or can_trim_prompt_cache(r.cache)) for r in over):
            return
        for req in over:
            excess = req.num_prefilled - least
            if not least:
                self._let_go(req)
                continue
            trim_prompt_cache(req.cache, excess)
            self.cache.count_aligned(excess)
            req.num_prefilled = req.num_reused = req.cached_tokens = least
            if req.stream is not None:
                req.stream.cached_tokens = least

    def _let_go(self, req: Request) -> None:
        self.cache.count_let_go(req.num_reused, req.num_reused % self.cache.block_size != 0)
        self.forget(req)
        req.cache, req.num_prefilled, req.num_reused, req.cached_tokens = None, 0, 0, 0
        if req.stream is not None:
            req.stream.cached_tokens = 0

    def remember_prompt(self, req: Request, cache: list[Any]) -> None:
        """At the end of a prompt: its blocks (a model served from checkpoints took its own
        while prefilling)."""
        if not self.checkpoints:
            self.remember_tokens(req.prefill_tokens, cache, req.cache_salt)

    def remember_answer(self, req: Request, cache: list[Any]) -> None:
        """When a request ends: prompt + answer, which the next turn of a conversation starts with."""
        tokens = req.prompt_tokens + req.generated
        if self.checkpoints:
            self.checkpoint(tokens, cache, req.cache_salt)
        else:
            self.remember_tokens(tokens, cache, req.cache_salt)

    def remember_tokens(self, tokens: list[int], cache: list[Any], salt: str = "") -> None:
        """Keep the blocks of ``tokens`` whose KV ``cache`` (plain, per layer) holds, the last
        partial one too (a later prompt that repeats them all, or shares part of a block, is
        served from it: ``PrefixCache.lookup``); ``salt`` keys what the tokens do not show
        (media, tenant; see ``kv/media.py``). ``cache`` may be a ``batch.StackedRow`` (where
        ``stacks``): the blocks are then sliced from it as it is."""
        if self.enabled and not self.checkpoints and len(tokens) >= self.cache.min_partial:
            fp = self.cache.fingerprint + ("|" + salt if salt else "")
            memo: dict[str, Any] = {"limit": len(tokens)}
            if isinstance(cache, StackedRow):
                n = len(tokens)
                memo["whole"] = (cache.keys[..., :n, :], cache.values[..., :n, :])
            with self.together():
                self.cache.insert(tokens, lambda start, end: self._payload(cache, start, end, memo), fingerprint=fp,
                                  tail=True)

    def checkpoint(self, tokens: list[int], cache: list[Any], salt: str = "") -> None:
        """Keep the state ``cache`` holds after ``tokens`` (a model served from checkpoints):
        the cut layers' full blocks and a checkpoint of the rest."""
        if not self.checkpoints or not tokens:
            return
        fp = self.cache.fingerprint + ("|" + salt if salt else "")
        cut = [cache[i] for i in self.layout.cut]

        def checkpoint_for(start: int) -> CheckpointPayload:
            tail = self._payload(cut, start, len(tokens)) if cut and start < len(tokens) else None
            return CheckpointPayload([snapshot.snapshot(cache[i]) for i in self.layout.whole], tail)

        with self.together():
            self.cache.insert_checkpoint(tokens, lambda start, end: self._payload(cut, start, end), checkpoint_for,
                                         fingerprint=fp)

    def block_payload_from(self, arrays: dict[str, mx.array]) -> "KVBlockPayload":
        return KVBlockPayload.from_arrays(arrays, self.num_layers, self.bits, self.group_size, self.dtype)

    def _fp(self, req: Request) -> str:
        salt = getattr(req, "cache_salt", "")
        return self.cache.fingerprint + ("|" + salt if salt else "")

    def forget(self, req: Request) -> None:
        if self.enabled and req.prefix_blocks:
            self.cache.release(req.prefix_blocks)
            req.prefix_blocks = ()

    def clear(self, disk: bool = False) -> int:
        """Drop the unreferenced blocks in memory (and every block on disk when ``disk``)."""
        if not self.enabled:
            return 0
        return self.cache.clear() + (self.disk.clear() if disk and self.disk is not None else 0)

    def close(self) -> None:
        """Keep what is in memory on disk too, so a restart finds it."""
        if self.enabled and self.disk is not None:
            self.cache.persist()
            self.disk.close()

    def stats(self) -> dict:
        if not self.enabled:
            return {"enabled": False, "mode": "none", "reason": self.reason}
        disk = self.disk.stats() if self.disk is not None else {}
        kinds = {"cache_layers": list(self.layout.kinds)} if self.checkpoints else {}
        return {"enabled": True, "mode": self.mode, "reason": None, "bits": self.bits} | kinds | \
            self.cache.stats() | disk

    def _cache_from(self, hit) -> list[Any]:
        """A fresh cache in the state after the hit's tokens: the cut layers from the blocks
        (and a checkpoint's tail), the others restored from the checkpoint."""
        cache = make_cache(self.model, self.kv)
        payloads = [b.payload for b in hit.blocks]
        if hit.partial is not None:
            payloads.append(hit.partial.payload.head(hit.partial_tokens))
        if hit.checkpoint is not None:
            payloads += [hit.checkpoint.payload.tail] if hit.checkpoint.payload.tail is not None else []
            for i, state in zip(self.layout.whole, hit.checkpoint.payload.states):
                snapshot.restore(cache[i], state)
        if payloads and self.layout.cut:
            stacked = _fill_kv([cache[i] for i in self.layout.cut], payloads)
            if stacked is not None and len(self.layout.cut) == len(cache):  # (a group of such rows merges at once)
                return HitCache(cache, StackedRow(*stacked))
        return cache

    def _payload(self, cache: list[Any], start: int, end: int, memo: dict | None = None) -> KVBlockPayload:
        """The block of positions ``start:end``. ``memo`` (one per remembered prompt, holding
        ``limit``: how far its blocks go) lets the blocks of a plain model share one stacking of
        all layers over the whole prompt, each block then one slice per side: a 16k-token prompt
        had cost 256 blocks x 2 x (16 slices + a stack) operations on the way to its first token."""
        if not cache:  # no layer a block can hold: the block only chains the checkpoints
            return KVBlockPayload([], self.bits, self.group_size, self.dtype)
        if memo is not None and "whole" in memo or not self.bits and uniform_kv(cache):
            whole = _stacked_upto(cache, memo) if memo is not None else None
            if whole is not None:
                stacked = (mx.contiguous(whole[0][..., start:end, :]), mx.contiguous(whole[1][..., start:end, :]))
            else:
                stacked = (mx.stack([c.keys[..., start:end, :] for c in cache]),
                           mx.stack([c.values[..., start:end, :] for c in cache]))
            self._copies.extend(stacked)
            return KVBlockPayload(None, dtype=self.dtype, stacked=stacked)
        layers = [(_span(c.keys, start, end), _span(c.values, start, end)) for c in cache]
        if self.bits and not self.kv.enabled:
            layers = [tuple(tuple(mx.quantize(a, group_size=self.group_size, bits=self.bits)) for a in pair)
                      for pair in layers]
        payload = KVBlockPayload(layers, self.bits, self.group_size, self.dtype)
        self._copies.extend(payload._arrays())
        return payload


def _only_hit(req: Request) -> bool:
    """Whether all the KV ``req`` holds came from the cache (no chunk of its prompt ran yet, not resumed)."""
    return req.num_prefilled == req.num_reused and req.resume is None


def _stacked_upto(cache: list[Any], memo: dict) -> tuple[mx.array, mx.array]:
    """Every layer's keys and values over ``memo['limit']`` positions, stacked once per memo."""
    if "whole" not in memo:
        n = memo["limit"]
        memo["whole"] = (mx.stack([c.keys[..., :n, :] for c in cache]), mx.stack([c.values[..., :n, :] for c in cache]))
    return memo["whole"]


def _span(part: Any, start: int, end: int) -> Any:
    """Positions ``start:end`` of a layer's keys or values (an array, or a quantised triple)."""
    if isinstance(part, (tuple, list)):
        return tuple(mx.contiguous(p[..., start:end, :]) for p in part)
    return mx.contiguous(part[..., start:end, :])


def _fill_kv(layers: list[Any], payloads: list[KVBlockPayload]) -> tuple[mx.array, mx.array] | None:
    """Concatenate the payloads' keys and values into the (empty) plain KV ``layers``; quantised
    layers (``--kv-bits``) take the blocks' triples as they are. Returns the keys and values of
    every layer stacked, where the layers are views of them (blocks kept stacked), else None."""
    if isinstance(layers[0], QuantizedKV):
        for i, layer in enumerate(layers):
            sides = [p.layers[i] for p in payloads]
            layer.fill(*(tuple(mx.concatenate([s[side][j] for s in sides], axis=2) for j in range(3))
                         for side in (0, 1)))
        return None
    if all(p.stacked is not None for p in payloads):  # one concatenation per side (none for one block)
        keys, values = payloads[0].stacked if len(payloads) == 1 else \
            (mx.concatenate([p.stacked[side] for p in payloads], axis=3) for side in (0, 1))
        for i, layer in enumerate(layers):  # each layer holds its slice as it is: no buffer zeroed and filled again
            layer.keys, layer.values, layer.offset = keys[i], values[i], keys.shape[3]
        return keys, values
    for i, layer in enumerate(layers):
        parts = [p.layer(i) for p in payloads]
        keys = mx.concatenate([k for k, _ in parts], axis=2)
        values = mx.concatenate([v for _, v in parts], axis=2)
        layer.update_and_fetch(keys, values)
    return None


def _kv_shape(model: Any, cache: list[Any], cut: tuple[int, ...]) -> tuple[Any, int]:
    """The KV dtype and head dimension of the plain KV layers, from one token through a
    throwaway cache; (None, 0) for a model with none."""
    if not cut:
        return None, 0
    model(mx.array([[0]]), cache=cache)
    keys = cache[cut[0]].keys
    if isinstance(keys, (tuple, list)):  # --kv-bits: (packed, scales, biases)
        layer = cache[cut[0]]
        return keys[1].dtype, keys[0].shape[-1] * 32 // layer.kv_bits
    return keys.dtype, keys.shape[-1]


def fingerprint(loaded: Any) -> str:
    """What changes the KV: the model's name and config, its weights (each tensor's name, shape,
    dtype and a sample of its values: see :func:`weights_identity`) and the experts each token
    is routed to (``--moe-top-k`` lowers the ``top_k`` of a mixture-of-experts model's blocks, so
    the same weights and config give another KV)."""
    from mlxctl.models.moe import moe_blocks

    config = json.dumps(getattr(loaded, "config", {}) or {}, sort_keys=True, default=str)
    blocks = moe_blocks(loaded.model) if hasattr(loaded.model, "modules") else []  # (test wrappers may lack it)
    routing = ",".join(str(b.top_k) for b in blocks)
    towers = getattr(getattr(loaded, "vision", None), "towers", None)  # image features feed the KV too
    weights = weights_identity([m for m in (loaded.model, towers) if hasattr(m, "parameters")])
    return hashlib.sha256(f"{loaded.name}|{config}|moe_top_k={routing}|{weights}".encode()).hexdigest()


WEIGHT_SAMPLES = 64  # values read from each tensor for the weights' identity


def weights_identity(modules: list[Any]) -> str:
    """A cheap identity of the weights a model holds in memory: for every tensor its name, shape
    and dtype and ``WEIGHT_SAMPLES`` of its values, evenly spread (packed quantised values,
    scales and biases alike). Two checkpoints of one architecture (a fine-tune, another seed of
    dummy weights) differ in their samples; the same weights always give the same identity, across
    restarts too (no float sums, whose order could vary). Reading a few values per tensor costs
    milliseconds where hashing the files would read every byte."""
    import numpy as np
    from mlx.utils import tree_flatten

    params = [(f"{i}.{name}", p) for i, m in enumerate(modules) for name, p in tree_flatten(m.parameters())]
    samples = []
    for _, p in params:
        flat = p.reshape(-1)
        if p.size > WEIGHT_SAMPLES:
            flat = flat[mx.array(np.linspace(0, p.size - 1, num=WEIGHT_SAMPLES).astype(np.int64))]
        samples.append(flat)
    mx.eval(samples)
    h = hashlib.sha256()
    for (name, p), s in zip(params, samples):
        h.update(f"{name}:{tuple(p.shape)}:{p.dtype};".encode())
        if s.dtype == mx.bfloat16:  # numpy has no bfloat16; float32 holds every value exactly
            s = s.astype(mx.float32)
        h.update(np.array(s).tobytes())
    return h.hexdigest()


def default_disk_budget(directory: str) -> int:
    """A tenth of the free space where the cache lives, at most 20 GiB."""
    import shutil

    path = os.path.abspath(os.path.expanduser(directory))
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return min(20 << 30, shutil.disk_usage(path).free // 10)


def default_budget() -> int:
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        memory = 8 << 30
    return min(4 << 30, memory // 10)
