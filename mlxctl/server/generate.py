"""Submitting to the engine from a view: admission control, aborts on disconnect, timeouts,
shutdown, and the per-request metrics (recorded here, so every endpoint gets them)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web

from mlxctl.engine.sampling import SamplingParams
from mlxctl.engine.streams import RequestStream
from mlxctl.errors import MlxctlError
from mlxctl.server.errors import ApiError
from mlxctl.server.interrupt import interrupt, timeout_error
from mlxctl.server.keys import SETTINGS, STATE
from mlxctl.server.served_model import engine_of, served_name

BACKSTOP_S = 10.0  # after the timeout event, how long a view may take before it is cancelled


def submit(request: web.Request, tokens: list[int], params: SamplingParams, cache_salt: str = "",
           images: tuple = ()) -> RequestStream:
    """Queue a generation, or refuse it: 503 when loading or the queue is full, 400 for bad input.
    ``images``: one per image placeholder of ``tokens`` (a vision model; see docs/vision.md)."""
    engine, settings = engine_of(request), request.app[SETTINGS]
    if engine.model is None:
        raise ApiError(503, "the model is still loading", headers={"Retry-After": "5"})
    if engine.queued >= settings.max_waiting:  # the inbox too: a burst arrives while a step runs
        raise ApiError(503, "the server is busy: too many queued requests", headers={"Retry-After": "1"})
    try:
        return engine.submit(tokens, params, loop=asyncio.get_running_loop(), cache_salt=cache_salt, images=images,
                             group=request)  # a request's n choices do not queue against each other
    except MlxctlError as err:
        raise ApiError.from_mlxctl(err) from err


@asynccontextmanager
async def generation(request: web.Request, tokens: list[int], params: SamplingParams,
                     cache_salt: str = "", images: tuple = ()) -> AsyncIterator[RequestStream]:
    """A stream that is aborted (and its memory freed) if the view exits before it finishes:
    a client disconnect, a timeout, a shutdown or an error while writing.

    At the time limit the stream ends with a RequestTimeoutError (an MlxctlError, HTTP 504)
    that the view raises while reading it; a view still inside the block a little later gets
    TimeoutError (asyncio.timeout's cancellation)."""
    stream = submit(request, tokens, params, cache_salt, images)
    state, limit = request.app[STATE], request.app[SETTINGS].request_timeout_s
    timer = asyncio.get_running_loop().call_later(limit, interrupt, stream, timeout_error(limit), len(tokens))
    state.streams.add(stream)
    try:
        async with asyncio.timeout(limit + BACKSTOP_S):
            yield stream
    finally:
        timer.cancel()
        state.streams.discard(stream)
        _settle(stream, state.metrics, served_name(request))


def _settle(stream: RequestStream, metrics, model: str) -> None:
    if stream.finish is None:
        stream.abort()
        metrics.record_abandoned(model)
    else:
        metrics.record(stream.finish, model)
