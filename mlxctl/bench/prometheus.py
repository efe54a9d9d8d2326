"""Scraping a server's Prometheus ``/metrics`` before and after a run, and the deltas."""

from __future__ import annotations

import math

import httpx

PREFIXES = ("mlxctl:", "vllm:")
SKIPPED_SUFFIXES = ("_bucket", "_created")


def parse_metrics(text: str, prefixes: tuple[str, ...] = PREFIXES) -> dict[str, float]:
    """Series of the wanted prefixes, summed over their labels (histogram buckets left out)."""
    totals: dict[str, float] = {}
    for line in text.splitlines():
        sample = _sample(line)
        if sample and sample[0].startswith(prefixes) and not sample[0].endswith(SKIPPED_SUFFIXES):
            totals[sample[0]] = totals.get(sample[0], 0.0) + sample[1]
    return totals


def _sample(line: str) -> tuple[str, float] | None:
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    name_end = min((i for i in (line.find("{"), line.find(" ")) if i >= 0), default=-1)
    if name_end < 0:
        return None
    rest = line[line.rindex("}") + 1 :] if "{" in line[: name_end + 1] else line[name_end:]
    try:
        value = float(rest.split()[0])
    except (IndexError, ValueError):
        return None
    return (line[:name_end], value) if math.isfinite(value) else None


def deltas(before: dict[str, float] | None, after: dict[str, float] | None) -> dict[str, float] | None:
    """after - before for every series in both (None when either scrape failed), and the
    prefix cache hit rate of the run when the server counts queries and hits."""
    if before is None or after is None:
        return None
    changed = {name: after[name] - before.get(name, 0.0) for name in sorted(after)}
    return changed | _hit_rate(changed)


def _hit_rate(changed: dict[str, float]) -> dict[str, float]:
    for prefix in PREFIXES:
        queries = changed.get(f"{prefix}prefix_cache_queries_total")
        hits = changed.get(f"{prefix}prefix_cache_hits_total")
        if queries and hits is not None:
            return {"prefix_cache_hit_rate": hits / queries}
    return {}


async def scrape(http: httpx.AsyncClient, base_url: str, headers: dict[str, str]) -> dict[str, float] | None:
    """The server's metrics, or None when it has no /metrics (that is fine)."""
    try:
        response = await http.get(base_url + "/metrics", headers=headers, timeout=10.0)
    except httpx.HTTPError:
        return None
    return parse_metrics(response.text) if response.status_code == 200 else None
