"""Per-client rate limit: a token bucket for each remote address, refilled continuously."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from aiohttp import web

from mlxctl.server.errors import ApiError
from mlxctl.server.keys import SETTINGS, STATE

EXEMPT = ("/health", "/metrics")
MAX_CLIENTS = 10_000  # past this many buckets, full (idle) ones are forgotten


@dataclass
class TokenBucket:
    capacity: float
    per_second: float
    tokens: float = -1.0
    stamp: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        if self.tokens < 0:
            self.tokens = self.capacity

    def take(self, now: float | None = None) -> float:
        """0 when a token was taken; otherwise the seconds until one is available."""
        now = time.monotonic() if now is None else now
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.per_second)
        self.stamp = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.per_second

    def is_full(self, now: float) -> bool:
        return self.tokens + (now - self.stamp) * self.per_second >= self.capacity


def bucket_for(buckets: dict[str, TokenBucket], client: str, per_minute: int) -> TokenBucket:
    if client not in buckets and len(buckets) >= MAX_CLIENTS:
        forget_idle(buckets)
    if client not in buckets:
        buckets[client] = TokenBucket(capacity=per_minute, per_second=per_minute / 60)
    return buckets[client]


def forget_idle(buckets: dict[str, TokenBucket]) -> None:
    now = time.monotonic()
    for client in [c for c, b in buckets.items() if b.is_full(now)]:
        del buckets[client]


@web.middleware
async def rate_limit(request: web.Request, handler) -> web.StreamResponse:
    per_minute = request.app[SETTINGS].rate_limit_per_minute
    if per_minute > 0 and request.path not in EXEMPT and request.method != "OPTIONS":
        wait = bucket_for(request.app[STATE].buckets, request.remote or "?", per_minute).take()
        if wait:
            raise ApiError(429, f"rate limit exceeded: {per_minute} requests per minute", code="rate_limit_exceeded",
                           headers={"Retry-After": str(max(1, math.ceil(wait)))})
    return await handler(request)
