"""Sending requests to one server with httpx and timing every streamed chunk."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from mlxctl.bench.checks import evaluate
from mlxctl.bench.result import RequestResult
from mlxctl.bench.spec import OPTIONAL_FIELDS, RequestSpec
from mlxctl.bench.sse import Event, parse_line

PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


def headers_for(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


class ServerClient:
    """One server under test; remembers the optional fields it refused (see :meth:`send`)."""

    def __init__(self, http: httpx.AsyncClient, base_url: str, endpoint: str, model: str,
                 api_key: str | None = None, timeout: float = 300.0):
        self.http, self.base_url, self.endpoint, self.model = http, base_url, endpoint, model
        self.headers, self.timeout = headers_for(api_key), timeout
        self.refused: set[str] = set()  # optional fields this server answered 400 to

    async def send(self, spec: RequestSpec) -> RequestResult:
        """Send one streamed request. On a 400, retry without the optional fields (those the
        error names first); if that works, leave them out from then on: the report then says
        outputs were not fixed-length. If it does not, the first failure is the result."""
        body = self._body(spec)
        first = result = await self._send_once(spec, body)
        dropped: list[str] = []
        for name in _droppable(body, first):
            if result.error_kind != "http_400":
                break
            body.pop(name)
            dropped.append(name)
            result = await self._send_once(spec, body)
        if dropped and result.ok:
            self.refused.update(dropped)
            return result
        return first if dropped else result

    def _body(self, spec: RequestSpec) -> dict[str, Any]:
        body = spec.body(self.endpoint, self.model)
        return {key: value for key, value in body.items() if key not in self.refused}

    async def _send_once(self, spec: RequestSpec, body: dict[str, Any]) -> RequestResult:
        result = RequestResult(spec.name, spec.max_tokens, time.perf_counter(), ignore_eos_sent="ignore_eos" in body)
        try:
            async with asyncio.timeout(self.timeout):
                await self._stream(body, result)
        except (TimeoutError, httpx.TimeoutException):
            return result.fail("timeout", f"no complete reply within {self.timeout:g} s")
        except httpx.TransportError as exc:
            return result.fail("connection", f"{type(exc).__name__}: {exc}".rstrip(": "))
        if result.ok and spec.checks is not None:
            result.check_failures = evaluate(spec.checks, result.text, result.finish_reason)
        return result

    async def _stream(self, body: dict[str, Any], result: RequestResult) -> None:
        url = self.base_url + PATHS[self.endpoint]
        async with self.http.stream("POST", url, json=body, headers=self.headers) as response:
            if response.status_code != 200:
                text = (await response.aread()).decode("utf-8", "replace")
                result.fail(f"http_{response.status_code}", " ".join(text.split())[:300])
                return
            await self._read_events(response, result)

    async def _read_events(self, response: httpx.Response, result: RequestResult) -> None:
        async for line in response.aiter_lines():
            event = parse_line(line)
            if event is None:
                continue
            if event.error or event.done:
                _finish(result, event)
                return
            _record(result, event, time.perf_counter() - result.sent_at)
        _finish(result, Event(done=True))


def _droppable(body: dict[str, Any], result: RequestResult) -> list[str]:
    """The optional fields in ``body``, those a 400's message names first."""
    if result.error_kind != "http_400":
        return []
    present = [name for name in OPTIONAL_FIELDS if name in body]
    return sorted(present, key=lambda name: name not in (result.error or ""))


def _record(result: RequestResult, event: Event, at: float) -> None:
    if event.has_output:
        result.chunk_times.append(at)
        result.text += event.text
    if event.finish_reason:
        result.finish_reason = event.finish_reason
    if event.usage:
        result.prompt_tokens = event.usage.get("prompt_tokens", result.prompt_tokens)
        result.completion_tokens = event.usage.get("completion_tokens", result.completion_tokens)


def _finish(result: RequestResult, event: Event) -> None:
    result.e2e = time.perf_counter() - result.sent_at
    if event.error:
        result.fail("stream_error", event.error)
    elif not result.chunk_times:
        result.fail("stream_error", "the stream ended without any output")
    else:
        result.ok = True


async def fetch_models(http: httpx.AsyncClient, base_url: str, api_key: str | None) -> tuple[int, Any, str | None]:
    """GET /v1/models: the HTTP status, the JSON answer (or None) and the ``server`` header."""
    response = await http.get(base_url + "/v1/models", headers=headers_for(api_key), timeout=30.0)
    server = response.headers.get("server")
    try:
        return response.status_code, (response.json() if response.status_code == 200 else None), server
    except ValueError:
        return response.status_code, None, server
