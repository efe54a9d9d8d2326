"""ModelRunner: prompt chunks and decode steps through the model's forward pass.

Runs only on the engine thread. Everything it returns is lazy; the engine decides when to
evaluate, so a decode step can be queued (``mx.async_eval``) while the previous step's tokens
are turned into text.

Structured output (requests with a ``constraint`` matcher): the mask a row samples step ``n+1``
with depends on the token it sampled at step ``n``, which that pipeline has not evaluated yet. A
batch with such rows queues the forward pass first, then reads step ``n``'s tokens, advances the
matchers and fills their masks on the CPU while the forward runs, and only then queues the
sampling. A batch without them is untouched: no extra sync, no extra work.

Images (vision models): a request with images is prefilled from input embeddings, chunk by
chunk like any prompt: each chunk's token embeddings with the image features spliced in over
the placeholder positions (``vision.adapter.VisionAdapter.embed``). Its first token and every
decode step after it go through the model as tokens, like every other row of the batch.
Requests without images call the model exactly as before.

3-D rotary positions (Qwen2.5-VL, vision/mrope.py): a prompt chunk of a request with images
runs under its image layout (and, Qwen3-VL, its deepstack features), and a decode step under
each row's position delta (0 for a text row), set on the vision adapter's ``rope`` context
around the forward pass.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, ContextManager

import mlx.core as mx
from mlxctl.engine.batch import DecodeBatch, HitCache, merged_hits
from mlxctl.engine.constraints import advance_all, constraint_masks
from mlxctl.engine.kv.quantized import make_cache
from mlxctl.engine.kv_config import KVQuant
from mlxctl.engine.request import Request
from mlxctl.engine.sampling import BatchSample, arrays_to_eval, sample_batch
from mlxctl.errors import EngineError


class ModelRunner:
    def __init__(self, model: Any, vision: Any = None, kv: KVQuant | None = None):
        self.model = model
        self.vision = vision  # vision.adapter.VisionAdapter of a vision model, else None
        self.kv = kv or KVQuant()  # --kv-bits: plain KV layers kept quantised (engine/kv/quantized.py)
        self._batchable: bool | None = None

    def new_cache(self) -> list[Any]:
        """A fresh per-layer cache for one request."""
        return make_cache(self.model, self.kv)

    def prefill(self, req: Request, n: int) -> BatchSample | None:
        """Run the next ``n`` prompt tokens; when the prompt is done, sample the first token."""
        if req.cache is None:
            req.cache = self.new_cache()
        elif isinstance(req.cache, HitCache):  # alone, the layers go on by themselves: the stacking would
            req.cache = list(req.cache)  # hold a second copy of the hit for as long as the request runs
        start = req.num_prefilled
        chunk = mx.array(req.prefill_tokens[start : start + n])[None]
        embeds = self._embeddings(req, start, n) if req.images else None
        req.num_prefilled += n
        with self._prompt_positions(req, start, n):
            if req.prompt_left > 0:
                self._fill(chunk, req.cache, embeds)
                return None
            logits = self._last_logits(chunk, req.cache, embeds)
        first = sample_batch(logits, [req.sampler], _first_masks([req], logits))
        mx.async_eval(arrays_to_eval(first))
        return first

    def can_batch_prefill(self, reqs: list[Request]) -> bool:
        """Whether the model's caches batch with left padding (mlx-lm's batched KV caches).
        Recurrent layers (``ArraysCache``) take no left padding: the pad tokens would run
        through their state, so such models prefill one request at a time (and batch decode)."""
        if self._batchable is None:
            caches = self.new_cache()
            try:
                merged = [type(c).merge([c]) for c in caches]
                self._batchable = all(hasattr(c, "prepare") for c in merged) and \
                    {type(c).__name__ for c in caches} <= PADDABLE
            except Exception:  # a cache type without merge: prefill one request at a time
                self._batchable = False
        return self._batchable

    def can_batch_tails(self, reqs: list[Request]) -> bool:
        """Whether the rest of these prompts can go through together although some already hold
        KV (a prefix-cache hit, earlier chunks): their caches are merged and the new tokens
        right-padded. Plain (or ``--kv-bits`` quantised) KV layers only: a rotating window has
        no right padding of its own."""
        return all(all(type(c).__name__ in TAILS for c in (r.cache or self.new_cache())) for r in reqs)

    def prefill_group(self, reqs: list[Request]) -> tuple[list[Any], BatchSample, list[int]]:
        """The rest of several requests' prompts in one forward pass: fresh prompts left-padded,
        or (some hold KV already) their caches merged and the new tokens right-padded; then
        their first tokens. Returns the batched cache, those tokens and the rows' left padding."""
        if any(r.cache is not None for r in reqs):
            cache, logits, left = self._tails_logits(reqs)
        else:
            cache, logits, left = self._fresh_logits(reqs)
        first = sample_batch(logits, [r.sampler for r in reqs], _first_masks(reqs, logits))
        mx.async_eval(arrays_to_eval(first))
        return cache, first, left

    def _fresh_logits(self, reqs: list[Request]) -> tuple[list[Any], mx.array, list[int]]:
        longest = max(r.prefill_len for r in reqs)
        pads = [longest - r.prefill_len for r in reqs]
        cache = [type(c).merge([c] + [self.new_cache()[i] for _ in reqs[1:]]) for i, c in enumerate(self.new_cache())]
        for c in cache:
            c.prepare(left_padding=pads)
        tokens = mx.array([[0] * pad + r.prefill_tokens for pad, r in zip(pads, reqs)])
        logits = self._last_logits(tokens, cache)
        for c in cache:
            c.finalize()
        return cache, logits, pads

    def _tails_logits(self, reqs: list[Request]) -> tuple[list[Any], mx.array, list[int]]:
        """Merging aligns the caches' ends (left padding); the tails but their last tokens are
        right-padded to one length, filled, and rolled so every row ends at the same column
        (mlx-lm's BatchKVCache ``prepare(right_padding=...)`` / ``finalize``); then one pass of
        the last tokens gives each row's logits."""
        caches = [r.cache if r.cache is not None else self.new_cache() for r in reqs]
        cache = merged_hits(caches) or [type(layers[0]).merge(list(layers)) for layers in zip(*caches)]
        tails = [r.prefill_tokens[r.num_prefilled:] for r in reqs]
        left = [max(r.num_prefilled for r in reqs) - r.num_prefilled for r in reqs]  # merge aligns the ends
        longest = max(len(t) for t in tails) - 1
        if longest > 0:
            pads = [longest - len(t) + 1 for t in tails]
            left = [a + b for a, b in zip(left, pads)]  # finalize rolls the right padding to the left
            for c in cache:
                c.prepare(right_padding=pads)
            self._fill(mx.array([t[:-1] + [0] * pad for t, pad in zip(tails, pads)]), cache, wait=False)
            for c in cache:
                c.finalize()
        return cache, self.model(mx.array([t[-1:] for t in tails]), cache=cache)[:, -1, :], left

    def _embeddings(self, req: Request, start: int, n: int) -> mx.array:
        """(1, n, hidden) input embeddings of the chunk, encoding the images it still needs."""
        if self.vision is None:
            raise EngineError("this model does not accept images")
        req.image_features = self.vision.features_for(req.images, req.image_spans, req.image_features, start)
        return self.vision.embed(req.prefill_tokens[start : start + n], start, req.image_spans, req.image_features)[None]

    def _prompt_positions(self, req: Request, start: int, n: int) -> ContextManager:
        rope = getattr(self.vision, "rope", None)
        if rope is None or not req.images:
            return nullcontext()
        deepstack = None
        if self.vision.deepstack_levels:
            ids = req.prefill_tokens[start : start + n]
            levels = self.vision.deepstack(ids, start, req.image_spans, req.image_features)
            deepstack = None if levels is None else (start, levels)
        return rope.prompt(self.vision.mrope_layout(req.images, req.image_spans), deepstack)

    def _row_positions(self, reqs: list[Request]) -> ContextManager:
        rope = getattr(self.vision, "rope", None)
        if rope is None:
            return nullcontext()
        return rope.rows([self.vision.mrope_layout(r.images, r.image_spans).delta if r.images else 0 for r in reqs])

    def _fill(self, tokens: mx.array, cache: list[Any], embeds: mx.array | None = None, wait: bool = True) -> None:
        """Run prompt tokens for their KV only: the logits are never evaluated, so the output
        projection (the vocabulary-wide matmul) is skipped for them. ``wait``: evaluate the
        cache now (a chunk that ends a step); without it the work stays queued for what follows."""
        if embeds is None:
            self.model(tokens, cache=cache)
        else:
            self.model(tokens, cache=cache, input_embeddings=embeds)
        if wait:
            mx.eval([c.state for c in cache])

    def _last_logits(self, tokens: mx.array, cache: list[Any], embeds: mx.array | None = None) -> mx.array:
        """Logits of the last position only (B, V), after filling the cache with the rest. A
        short chunk (the tail left after a prefix-cache hit, a short prompt) goes through in one
        pass: on a GPU a second pass costs more in kernel launches than the logits it skips."""
        if tokens.shape[1] <= ONE_PASS_TOKENS:
            if embeds is None:
                return self.model(tokens, cache=cache)[:, -1, :]
            return self.model(tokens, cache=cache, input_embeddings=embeds)[:, -1, :]
        if tokens.shape[1] > 1:  # queued with the last position's pass: no host round trip between
            self._fill(tokens[:, :-1], cache, None if embeds is None else embeds[:, :-1], wait=False)
        if embeds is None:
            return self.model(tokens[:, -1:], cache=cache)[:, -1, :]
        return self.model(tokens[:, -1:], cache=cache, input_embeddings=embeds[:, -1:])[:, -1, :]

    def decode(self, batch: DecodeBatch) -> BatchSample:
        """Queue one decode step for every row; returns the (lazy) next tokens."""
        with self._row_positions(batch.requests):
            logits = self.model(batch.tokens[:, None], cache=batch.caches)[:, -1, :]
        samplers = [r.sampler for r in batch.requests]
        matchers = [r.constraint for r in batch.requests]
        if all(m is None for m in matchers):
            nxt = sample_batch(logits, samplers)
        else:
            mx.async_eval(logits)  # the forward runs while the CPU works out the masks
            advance_all(matchers, batch.tokens.tolist())
            nxt = sample_batch(logits, samplers, constraint_masks(matchers, logits.shape[-1]))
        mx.async_eval(arrays_to_eval(nxt))
        return nxt


    def verify(self, batch: DecodeBatch, rows: list[list[int]] | mx.array) -> mx.array:
        """(B, L, V) logits of the rows' pass over ``rows`` (each its pending token, then a draft
        of L - 1; engine/speculative_step.py; an array: tokens not yet read back). The caches
        keep all of them until cut."""
        return self.model(rows if isinstance(rows, mx.array) else mx.array(rows), cache=batch.caches)


PADDABLE = {"KVCache", "RotatingKVCache", "QuantizedKV"}  # cache layers that take left padding exactly
TAILS = {"KVCache", "QuantizedKV"}  # cache layers whose batched form takes right padding
ONE_PASS_TOKENS = 32  # a last chunk this short is not split into a fill pass and a one-token pass


def _first_masks(reqs: list[Request], logits: mx.array) -> list[mx.array | None] | None:
    """The masks for the token sampled right after the prompt (nothing generated yet)."""
    matchers = [r.constraint for r in reqs]
    if all(m is None for m in matchers):
        return None
    return constraint_masks(matchers, logits.shape[-1])
