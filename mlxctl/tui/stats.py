"""Figures derived from successive polls: token rates, TTFT history, per-request speed.

The daemon reports totals and snapshots; rates need two looks. Output tokens are counted as
``generation_tokens_total`` (bumped when a request finishes) plus the ``generated`` count of
every request still in flight, so the total grows smoothly while requests run instead of
jumping when they end. A restarted daemon (uptime went back) or a counter that went back
starts a new baseline instead of showing a negative rate.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from mlxctl.tui.client import Poll

HISTORY = 240  # points kept for the plots


def in_flight(status: dict) -> list[dict]:
    """Every request the engine holds, running first, then prefilling, then waiting."""
    engine = status.get("engine") or {}
    return [*(engine.get("running") or []), *(engine.get("prefilling") or []), *(engine.get("waiting") or [])]


@dataclass
class _Baseline:
    at: float
    uptime_s: float
    generated: float | None
    prompt: float | None
    ttft_sum: float | None
    ttft_count: float | None


class Tracker:
    """Feed it each successful :class:`Poll`; read the rates and histories."""

    def __init__(self, history: int = HISTORY):
        self.history = history
        self.reset()

    def reset(self) -> None:
        """Forget everything: histories, peaks, baselines."""
        self.throughput: deque[float] = deque(maxlen=self.history)  # output tok/s per interval
        self.ttft_ms: deque[float] = deque(maxlen=self.history)  # mean TTFT of requests finished per interval
        self.output_tps: float | None = None
        self.prompt_tps: float | None = None
        self.peak_output_tps = 0.0
        self.last_ttft_ms: float | None = None
        self.request_tps: dict[str, float] = {}  # request id -> tok/s over the last interval
        self.polls = 0
        self.rebase()

    def rebase(self) -> None:
        """Keep the histories but measure the next interval from the next poll (after a pause)."""
        self._base: _Baseline | None = None
        self._requests: dict[str, tuple[float, int]] = {}  # id -> (at, generated) when last seen

    def update(self, poll: Poll) -> None:
        if not poll.ok:
            self.rebase()
            self.output_tps = self.prompt_tps = None
            self.request_tps.clear()
            return
        self.polls += 1
        status, metrics = poll.status, poll.metrics
        requests = in_flight(status)
        base = _Baseline(
            at=poll.at,
            uptime_s=float(status.get("uptime_s") or 0.0),
            generated=_total(metrics, "generation_tokens_total", requests, "generated"),
            prompt=_total(metrics, "prompt_tokens_total", requests, "prompt_done"),
            ttft_sum=metrics.get("time_to_first_token_seconds_sum"),
            ttft_count=metrics.get("time_to_first_token_seconds_count"),
        )
        prev = self._base
        if prev is not None and base.uptime_s + 1e-3 < prev.uptime_s:  # the daemon restarted
            prev, self._requests = None, {}
        self._request_rates(poll.at, requests)
        if prev is not None and base.at > prev.at:
            self._rates(prev, base)
        self._base = base

    def _rates(self, prev: _Baseline, now: _Baseline) -> None:
        dt = now.at - prev.at
        if now.generated is not None and prev.generated is not None:
            self.output_tps = max(0.0, now.generated - prev.generated) / dt
        else:  # no /metrics: only what in-flight requests generated meanwhile
            self.output_tps = sum(self.request_tps.values())
        if now.prompt is not None and prev.prompt is not None:
            self.prompt_tps = max(0.0, now.prompt - prev.prompt) / dt
        self.throughput.append(self.output_tps)
        self.peak_output_tps = max(self.peak_output_tps, self.output_tps)
        if None not in (now.ttft_sum, now.ttft_count, prev.ttft_sum, prev.ttft_count):
            count = now.ttft_count - prev.ttft_count
            if count > 0:
                self.last_ttft_ms = 1000 * max(0.0, now.ttft_sum - prev.ttft_sum) / count
                self.ttft_ms.append(self.last_ttft_ms)

    def _request_rates(self, at: float, requests: list[dict]) -> None:
        seen: dict[str, tuple[float, int]] = {}
        rates: dict[str, float] = {}
        for r in requests:
            rid, generated = str(r.get("id")), int(r.get("generated") or 0)
            seen[rid] = (at, generated)
            before = self._requests.get(rid)
            if before is not None and at > before[0]:
                rates[rid] = max(0, generated - before[1]) / (at - before[0])
        self._requests, self.request_tps = seen, rates

    def mean_ttft_ms(self, metrics: dict[str, float]) -> float | None:
        """Mean TTFT over the daemon's life (from its histogram)."""
        count = metrics.get("time_to_first_token_seconds_count") or 0
        return 1000 * metrics.get("time_to_first_token_seconds_sum", 0.0) / count if count else None


def _total(metrics: dict[str, float], counter: str, requests: list[dict], field: str) -> float | None:
    if counter not in metrics:
        return None
    return metrics[counter] + sum(int(r.get(field) or 0) for r in requests)


def finished_requests(metrics: dict[str, float]) -> int:
    return int(sum(v for k, v in metrics.items() if k.startswith("request_success_total")))
