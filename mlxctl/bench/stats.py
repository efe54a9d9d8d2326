"""Summary statistics: mean and percentiles (linear interpolation, as numpy's default)."""

from __future__ import annotations

import math
from collections.abc import Sequence

PERCENTILES = (50, 90, 95, 99)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) of non-empty ``values``, like ``numpy.percentile``."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize(values: Sequence[float]) -> dict[str, float | int | None]:
    """count, mean, p50, p90, p95, p99 (None when there are no values)."""
    summary: dict[str, float | int | None] = {"count": len(values)}
    summary["mean"] = sum(values) / len(values) if values else None
    for q in PERCENTILES:
        summary[f"p{q}"] = percentile(values, q) if values else None
    return summary


def ratio(value: float | None, base: float | None) -> float | None:
    """value / base, or None when either is missing or base is 0."""
    if value is None or not base:
        return None
    return value / base
