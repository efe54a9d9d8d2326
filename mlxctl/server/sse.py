"""Server-sent events: open a stream response and write events to it."""

from __future__ import annotations

import asyncio
import json

from aiohttp import web


class SseResponse(web.StreamResponse):
    """A stream response that notes when it last wrote (``last_write``, loop time): keep-alives
    are sent only after that long a silence."""

    last_write: float = 0.0

    async def write(self, data: bytes | bytearray | memoryview) -> None:
        self.last_write = asyncio.get_running_loop().time()
        await super().write(data)


async def open_sse(request: web.Request) -> SseResponse:
    """The status and headers go out at once (aiohttp sends a StreamResponse's on prepare), so a
    client sees the 200 before the engine has produced anything."""
    resp = SseResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                "X-Accel-Buffering": "no"})
    await resp.prepare(request)
    resp.last_write = asyncio.get_running_loop().time()
    return resp


async def send(resp: web.StreamResponse, data: dict | str, event: str | None = None) -> None:
    """One event; ``data`` dicts are JSON-encoded. Raises ConnectionError when the client is gone."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    await resp.write(f"{head}data: {payload}\n\n".encode())


async def send_comment(resp: web.StreamResponse, text: str) -> None:
    """An SSE comment line (``: text``): clients and SDKs skip it; a keep-alive."""
    await resp.write(f": {text}\n\n".encode())
