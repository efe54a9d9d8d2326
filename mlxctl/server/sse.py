"""Server-sent events: open a stream response and write events to it."""

from __future__ import annotations

import json

from aiohttp import web


async def open_sse(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                       "X-Accel-Buffering": "no"})
    await resp.prepare(request)
    return resp


async def send(resp: web.StreamResponse, data: dict | str, event: str | None = None) -> None:
    """One event; ``data`` dicts are JSON-encoded. Raises ConnectionError when the client is gone."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    await resp.write(f"{head}data: {payload}\n\n".encode())
