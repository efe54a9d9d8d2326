"""When requests start: Poisson arrivals at a request rate (seeded, reproducible)."""

from __future__ import annotations

import random


def poisson_arrivals(count: int, rate: float, seed: int = 0) -> list[float]:
    """Start offsets in seconds of ``count`` requests arriving at ``rate`` per second on average:
    exponential gaps, the first request at 0. An infinite rate sends them all at once."""
    if count <= 0:
        return []
    if rate == float("inf"):
        return [0.0] * count
    rng = random.Random(seed)
    times, now = [0.0], 0.0
    for _ in range(count - 1):
        now += rng.expovariate(rate)
        times.append(now)
    return times
