"""POST /api/pull (Ollama): ``mlxctl model acquire`` of the named model into the model store,
its progress streamed as Ollama's status lines (``{"status": "..."}``, then ``{"status":
"success"}``).

The name is whatever ``model acquire`` takes: a catalog name, a Hugging Face repo id, a local
folder. Pulling does not serve the model: the server answers to the models it was started with
(or, with ``serve --allow-unconfigured-models``, loads a store model a request names). A model
that cannot be fetched is an error in Ollama's shape: the HTTP status when nothing was streamed
yet, else a last ``{"error": "..."}`` line.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from mlxctl.api.ollama_models import OllamaPullRequest
from mlxctl.errors import MlxctlError
from mlxctl.server.body import parse_body
from mlxctl.server.errors import ApiError
from mlxctl.server.ndjson import open_ndjson, send_line

_DONE = object()


async def pull(request: web.Request) -> web.StreamResponse:
    body = await parse_body(request, OllamaPullRequest)
    if not body.model_name:
        raise ApiError(400, "model is required", param="model")
    loop, lines = asyncio.get_running_loop(), asyncio.Queue()

    def progress(text: str) -> None:
        loop.call_soon_threadsafe(lines.put_nowait, {"status": text})

    task = asyncio.ensure_future(asyncio.to_thread(_acquire, body.model_name, progress))
    task.add_done_callback(lambda _: lines.put_nowait(_DONE))
    if not body.stream:
        await task  # an MlxctlError becomes the protocol's error response
        return web.json_response({"status": "success"})
    return await _stream(request, body.model_name, lines, task)


def _acquire(name: str, progress: Any) -> None:
    from mlxctl.models.acquire import acquire

    acquire(name, progress=progress, progress_bars=False)


async def _stream(request: web.Request, name: str, lines: asyncio.Queue, task: asyncio.Future) -> web.StreamResponse:
    """Status lines as acquire reports them; the response opens with the first one (an error
    before it is a plain JSON error with its status)."""
    resp = None
    while (line := await lines.get()) is not _DONE:
        if resp is None:
            resp = await open_ndjson(request)
            await send_line(resp, {"status": f"pulling {name}"})
        await send_line(resp, line)
    try:
        task.result()
    except MlxctlError as err:
        if resp is None:
            raise
        await send_line(resp, {"error": ApiError.from_mlxctl(err).message})
        return resp
    resp = resp or await open_ndjson(request)
    await send_line(resp, {"status": "success"})
    return resp
