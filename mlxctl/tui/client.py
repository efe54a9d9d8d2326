"""Polling a running `mlxctl serve` daemon: ``GET /v1/status`` and ``GET /metrics``.

One :class:`StatusPoller` keeps an ``httpx.AsyncClient`` open; each :meth:`StatusPoller.poll`
returns a :class:`Poll` that either carries the figures or says, in one line, why it could
not get them (nothing listening, refused key, not an mlxctl server). It never raises for a
daemon that is down or restarting, so a view can just keep polling.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import httpx


METRIC_PREFIX = "mlxctl:"


def base_url(text: str) -> str:
    """A daemon's base URL, ``http(s)://host[:port][/prefix]`` without a trailing ``/`` or ``/v1``."""
    from mlxctl.bench.config import parse_url

    return parse_url(text)


@dataclass
class Poll:
    """One look at the daemon: ``status`` (the /v1/status JSON) or ``error`` (why not)."""

    at: float  # time.monotonic() when the answer came
    status: dict | None = None
    metrics: dict[str, float] = field(default_factory=dict)  # flat: name (+ labels) -> value
    error: str | None = None
    latency_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status is not None


class StatusPoller:
    """Fetches status and metrics from one daemon; safe to call while it is down."""

    def __init__(self, url: str, api_key: str | None = None, timeout: float = 5.0,
                 transport: httpx.AsyncBaseTransport | None = None):
        self.url = base_url(url)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(base_url=self.url, headers=headers, timeout=timeout,
                                         transport=transport)

    async def poll(self) -> Poll:
        start = time.monotonic()
        try:
            status = await self._status()
        except _PollError as exc:
            return Poll(at=time.monotonic(), error=str(exc))
        metrics = await self._metrics()
        now = time.monotonic()
        return Poll(at=now, status=status, metrics=metrics, latency_s=now - start)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _status(self) -> dict:
        try:
            response = await self._client.get("/v1/status")
        except httpx.ConnectError:
            raise _PollError(f"nothing is listening at {self.url}") from None
        except httpx.TimeoutException:
            raise _PollError(f"{self.url} did not answer in time") from None
        except httpx.HTTPError as exc:  # reset mid-answer (a restart), protocol errors
            raise _PollError(f"{self.url}: {type(exc).__name__}: {exc}".rstrip(": ")) from None
        if response.status_code in (401, 403):
            raise _PollError(f"{self.url} refused the API key (HTTP {response.status_code}); give --api-key")
        if response.status_code == 404:
            raise _PollError(f"{self.url} has no /v1/status: not an mlxctl server?")
        if response.status_code >= 400:
            raise _PollError(f"{self.url}/v1/status answered HTTP {response.status_code}")
        try:
            status = response.json()
        except ValueError:
            raise _PollError(f"{self.url}/v1/status is not JSON: not an mlxctl server?") from None
        if not isinstance(status, dict) or "engine" not in status:
            raise _PollError(f"{self.url}/v1/status is not an mlxctl status: not an mlxctl server?")
        return status

    async def _metrics(self) -> dict[str, float]:
        """The Prometheus figures, or {} when they cannot be had (status is still shown)."""
        try:
            response = await self._client.get("/metrics")
        except httpx.HTTPError:
            return {}
        if response.status_code != 200:
            return {}
        return parse_metrics(response.text)


class _PollError(Exception):
    pass


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text to ``{name: value}``, our prefix dropped; labels other than
    ``model_name`` stay in the key (``request_success_total{finished_reason="stop"}``)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_part, _, value = line.rpartition(" ")
        try:
            number = float(value)
        except ValueError:
            continue
        if math.isnan(number):
            continue
        name, _, labels = name_part.partition("{")
        if not name.startswith(METRIC_PREFIX):
            continue
        name = name[len(METRIC_PREFIX):]
        kept = [p for p in _split_labels(labels.rstrip("}")) if not p.startswith("model_name=")]
        key = f"{name}{{{','.join(kept)}}}" if kept else name
        out[key] = out.get(key, 0.0) + number
    return out


def _split_labels(text: str) -> list[str]:
    parts, current, quoted = [], "", False
    for ch in text:
        if ch == '"' and not current.endswith("\\"):
            quoted = not quoted
        if ch == "," and not quoted:
            parts.append(current)
            current = ""
        else:
            current += ch
    if current:
        parts.append(current)
    return [p.strip() for p in parts if p.strip()]
