"""Submitting to the engine from a view: admission control, aborts on disconnect, timeouts."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import AsyncIterator

from aiohttp import web

from mlxctl.engine.sampling import SamplingParams
from mlxctl.engine.streams import RequestStream
from mlxctl.errors import MlxctlError
from mlxctl.server.errors import ApiError
from mlxctl.server.keys import ENGINE, SETTINGS


def submit(request: web.Request, tokens: list[int], params: SamplingParams) -> RequestStream:
    """Queue a generation, or refuse it: 503 when the queue is full, 400 for bad input."""
    engine, settings = request.app[ENGINE], request.app[SETTINGS]
    if len(engine.scheduler.waiting) >= settings.max_waiting:
        raise ApiError(503, "the server is busy: too many queued requests", headers={"Retry-After": "1"})
    try:
        return engine.submit(tokens, params, loop=asyncio.get_running_loop())
    except MlxctlError as err:
        raise ApiError.from_mlxctl(err) from err


@asynccontextmanager
async def generation(request: web.Request, tokens: list[int], params: SamplingParams) -> AsyncIterator[RequestStream]:
    """A stream that is aborted (and its memory freed) if the view exits before it finishes:
    a client disconnect, a timeout, or an error while writing."""
    stream = submit(request, tokens, params)
    try:
        async with asyncio.timeout(request.app[SETTINGS].request_timeout_s):
            yield stream
    finally:
        if stream.finish is None:
            stream.abort()
