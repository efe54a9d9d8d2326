"""ModelRunner: prompt chunks and decode steps through the model's forward pass.

Runs only on the engine thread. Everything it returns is lazy; the engine decides when to
evaluate, so a decode step can be queued (``mx.async_eval``) while the previous step's tokens
are turned into text.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache

from mlxctl.engine.batch import DecodeBatch
from mlxctl.engine.request import Request
from mlxctl.engine.sampling import BatchSample, arrays_to_eval, sample_batch


class ModelRunner:
    def __init__(self, model: Any):
        self.model = model

    def prefill(self, req: Request, n: int) -> BatchSample | None:
        """Run the next ``n`` prompt tokens; when the prompt is done, sample the first token."""
        if req.cache is None:
            req.cache = make_prompt_cache(self.model)
        start = req.num_prefilled
        chunk = mx.array(req.prompt_tokens[start : start + n])[None]
        logits = self.model(chunk, cache=req.cache)
        req.num_prefilled += n
        if req.prompt_left > 0:
            mx.eval([c.state for c in req.cache])
            return None
        first = sample_batch(logits[:, -1, :], [req.sampler])
        mx.async_eval(arrays_to_eval(first))
        return first

    def decode(self, batch: DecodeBatch) -> BatchSample:
        """Queue one decode step for every row; returns the (lazy) next tokens."""
        logits = self.model(batch.tokens[:, None], cache=batch.caches)
        nxt = sample_batch(logits[:, -1, :], [r.sampler for r in batch.requests])
        mx.async_eval(arrays_to_eval(nxt))
        return nxt
