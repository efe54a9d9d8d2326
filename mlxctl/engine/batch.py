"""DecodeBatch: the running requests' KV caches and next input tokens, one row each.

Caches are mlx-lm's own classes, combined through their public ``merge`` / ``extend`` /
``filter`` / ``extract`` methods. A lone request keeps its plain per-request cache (no
padding, no mask: as fast as mlx-lm's own loop); a second request turns the batch into
mlx-lm's batched caches; the batch returns to plain caches when one row is left.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx

from mlxctl.engine.request import Request


class DecodeBatch:
    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.caches: list[Any] | None = None
        self.tokens: mx.array | None = None  # (B,) next inputs: sampled, not yet emitted
        self.samples: list[Any] = []  # per row: logprob data for the pending token, or None
        self._batched = False

    @property
    def batched(self) -> bool:
        """Whether the caches are mlx-lm's batched ones (else one request's plain caches)."""
        return self._batched

    def __len__(self) -> int:
        return len(self.requests)

    def join(self, reqs: list[Request], cache: list[Any], tokens: mx.array, samples: list[Any],
             batched: bool = False) -> None:
        """Add requests whose prompts are done, with their first sampled (lazy) tokens.

        ``cache`` is one request's plain per-layer cache, or (``batched``) a group's batched one."""
        if not self.requests:
            self.caches, self.tokens, self._batched = cache, tokens.reshape(-1), batched
        else:
            self.caches = self._merged(cache, batched)
            self.tokens = mx.concatenate([self.tokens, tokens.reshape(-1)])
        self.requests.extend(reqs)
        self.samples.extend(samples)

    def _merged(self, cache: list[Any], batched: bool) -> list[Any]:
        if not self._batched and not batched:
            self._batched = True
            return [type(mine).merge([mine, new]) for mine, new in zip(self.caches, cache)]
        mine = self.caches if self._batched else [type(c).merge([c]) for c in self.caches]
        new = cache if batched else [type(c).merge([c]) for c in cache]
        for m, n in zip(mine, new):
            m.extend(n)
        self._batched = True
        return mine

    def keep(self, rows: list[int]) -> None:
        """Drop every row not listed (finished or aborted requests); frees their KV."""
        if len(rows) == len(self.requests):
            return
        if not rows:
            self.__init__()
            return
        self.requests = [self.requests[i] for i in rows]
        self.samples = [self.samples[i] for i in rows]
        self.tokens = self.tokens[mx.array(rows)]
        if self._batched:
            self._filter(rows)

    def _filter(self, rows: list[int]) -> None:
        for c in self.caches:
            c.filter(mx.array(rows))
        if len(rows) == 1:
            self.caches = [c.extract(0) for c in self.caches]
            self._batched = False

    def advance(self, tokens: mx.array, samples: list[Any]) -> tuple[list[Request], mx.array, list[Any]]:
        """Install the next step's tokens; return the rows' pending (now previous) tokens."""
        pending = (list(self.requests), self.tokens, self.samples)
        self.tokens, self.samples = tokens, samples
        return pending

    def nbytes(self) -> int:
        if not self.caches:
            return 0
        return sum(c.nbytes for c in self.caches)
