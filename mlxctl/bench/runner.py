"""Running a batch of requests: a closed loop at fixed concurrency, or arrivals on a schedule."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence

from mlxctl.bench.result import RequestResult
from mlxctl.bench.spec import RequestSpec

Send = Callable[[RequestSpec], Awaitable[RequestResult]]


async def closed_loop(send: Send, specs: Sequence[RequestSpec], concurrency: int) -> tuple[list[RequestResult], float]:
    """``concurrency`` workers each send the next request as soon as theirs finishes.
    Returns the results in spec order and the wall time."""
    queue = iter(enumerate(specs))
    results: list[RequestResult | None] = [None] * len(specs)

    async def worker() -> None:
        for index, spec in queue:
            results[index] = await send(spec)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(specs)))))
    return [r for r in results if r is not None], time.perf_counter() - started


async def on_schedule(send: Send, specs: Sequence[RequestSpec], arrivals: Sequence[float],
                      cap: int | None = None) -> tuple[list[RequestResult], float]:
    """Send each request at its arrival offset (seconds), at most ``cap`` in flight."""
    gate = asyncio.Semaphore(cap) if cap else None
    started = time.perf_counter()

    async def one(spec: RequestSpec, at: float) -> RequestResult:
        await asyncio.sleep(max(0.0, started + at - time.perf_counter()))
        if gate is None:
            return await send(spec)
        async with gate:
            return await send(spec)

    results = await asyncio.gather(*(one(s, t) for s, t in zip(specs, arrivals)))
    return list(results), time.perf_counter() - started
