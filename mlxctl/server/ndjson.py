"""Newline-delimited JSON streams (Ollama's): one JSON object a line, no keep-alives (a blank
line is no JSON object, and Ollama's clients parse every line)."""

from __future__ import annotations

import json

from aiohttp import web

from mlxctl.server.sse import SseResponse


async def open_ndjson(request: web.Request) -> SseResponse:
    """The 200 and headers go out at once, before the first line."""
    resp = SseResponse(headers={"Content-Type": "application/x-ndjson", "Cache-Control": "no-cache",
                                "X-Accel-Buffering": "no"})
    await resp.prepare(request)
    return resp


async def send_line(resp: web.StreamResponse, data: dict) -> None:
    """One line; raises ConnectionError when the client is gone."""
    await resp.write((json.dumps(data, ensure_ascii=False) + "\n").encode())
