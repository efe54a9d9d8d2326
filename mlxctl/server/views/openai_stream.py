"""Streaming OpenAI responses over SSE: one or more engine streams -> chunks -> ``[DONE]``.

Every choice gets its opening chunk, then pieces of ``stream_interval`` tokens, then a last chunk
carrying its finish_reason; with ``stream_options.include_usage`` a chunk with no choices and the
usage follows. An engine error after the stream has started is sent as an ``error`` event (an
OpenAI-shaped error body) and the stream ends without ``[DONE]``. Leaving early for any reason
(client gone, timeout) aborts every unfinished engine request.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, aclosing

from aiohttp import web

from mlxctl.api.openai_output import OpenAIOutput, total_usage
from mlxctl.api.openai_pieces import ChunkGrouper
from mlxctl.api.openai_translate import Job
from mlxctl.engine.events import Event, FinishEvent
from mlxctl.engine.streams import RequestStream
from mlxctl.errors import MlxctlError
from mlxctl.server.errors import ApiError, error_body
from mlxctl.server.generate import generation
from mlxctl.server.keepalive import kept_alive
from mlxctl.server.keys import SETTINGS
from mlxctl.server.sse import open_sse, send


async def open_generations(request: web.Request, stack: AsyncExitStack, jobs: list[Job]) -> list[RequestStream]:
    """Submit every job; all are aborted when ``stack`` closes before they finish."""
    return [await stack.enter_async_context(generation(request, job.tokens, job.params, job.cache_salt, job.images))
            for job in jobs]


async def stream_response(request: web.Request, jobs: list[Job], output: OpenAIOutput, n: int) -> web.StreamResponse:
    resp = None
    try:
        async with AsyncExitStack() as stack:
            streams = await open_generations(request, stack, jobs)  # refusals are still plain JSON errors
            resp = await open_sse(request)
            await _write(request, resp, streams, jobs, output, n)
    except (ConnectionError, TimeoutError) as exc:  # the stack has aborted what was unfinished
        if resp is None:
            raise
        if isinstance(exc, TimeoutError):
            await _send_error(request, resp, ApiError(504, "the request took longer than the server's request timeout"))
    return resp


async def _send_error(request, resp, err: ApiError) -> None:
    try:
        await send(resp, error_body(request, err))
    except ConnectionError:
        pass


async def _write(request, resp, streams, jobs, output, n) -> None:
    for job in jobs:
        if (chunk := output.opening(job.index, job.echo)) is not None:
            await send(resp, chunk)
    try:
        usages = await _send_pieces(request, resp, streams, jobs, output)
    except MlxctlError as err:
        await _send_error(request, resp, ApiError.from_mlxctl(err))
        return
    if output.include_usage:
        await send(resp, output.usage_chunk(total_usage(usages, n)))
    await send(resp, "[DONE]")


async def _send_pieces(request, resp, streams, jobs, output) -> list:
    interval = request.app[SETTINGS].stream_interval
    groupers = [ChunkGrouper(interval, job.params.logprobs, len(job.echo)) for job in jobs]
    usages = [None] * len(jobs)
    async with aclosing(merge_streams(streams)) as merged, aclosing(kept_alive(request, resp, merged)) as events:
        async for i, event in events:
            if isinstance(event, FinishEvent):
                usages[i] = event.usage
            if (piece := groupers[i].add(event)) is not None and (chunk := output.chunk(jobs[i].index, piece)):
                await send(resp, chunk)
    return usages


async def merge_streams(streams: list[RequestStream]) -> AsyncIterator[tuple[int, Event]]:
    """Events of several streams as they come, each with its stream's position in the list."""
    if len(streams) == 1:
        async for event in streams[0]:
            yield 0, event
        return
    queue: asyncio.Queue = asyncio.Queue()
    tasks = [asyncio.create_task(_pump(i, s, queue)) for i, s in enumerate(streams)]
    finished = 0
    try:
        while finished < len(streams):
            i, item = await queue.get()
            if isinstance(item, BaseException):
                raise item
            finished += isinstance(item, FinishEvent)
            yield i, item
    finally:
        for task in tasks:
            task.cancel()


async def _pump(index: int, stream: RequestStream, queue: asyncio.Queue) -> None:
    try:
        async for event in stream:
            queue.put_nowait((index, event))
    except Exception as exc:  # noqa: BLE001 - handed to the reader, which raises it in order
        queue.put_nowait((index, exc))
