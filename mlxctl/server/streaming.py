"""The one streaming lifecycle of every SSE endpoint (chat, completions, messages, responses).

:func:`stream_sse` submits the jobs (a refusal is still a plain JSON error), opens the event
stream, sends the encoder's opening events, then each choice's pieces of ``stream_interval``
tokens as the encoder maps them, with the protocol's keep-alive in every silence of
``--sse-ping-interval`` seconds, and the encoder's closing events. It ends the stream the same
way for every protocol: an engine error or a timeout after the stream has started is the
encoder's error event; a client that went away ends it quietly; leaving early for any reason
aborts every unfinished engine request. A view is then parse -> prepare -> ``stream_sse``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, aclosing
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from mlxctl.api.openai_pieces import ChunkGrouper, Piece
from mlxctl.engine.events import Event, FinishEvent
from mlxctl.engine.streams import RequestStream
from mlxctl.errors import MlxctlError
from mlxctl.server.errors import ApiError
from mlxctl.server.generate import generation
from mlxctl.server.keepalive import kept_alive
from mlxctl.server.keys import SETTINGS
from mlxctl.server.sse import SseResponse, open_sse, send

TIMEOUT_MESSAGE = "the request took longer than the server's request timeout"


@dataclass(frozen=True)
class Sse:
    """One server-sent event: its data (a dict is sent as JSON) and its ``event:`` name."""

    data: dict | str
    event: str | None = None


class Encoder(Protocol):
    """A protocol's stream: engine pieces -> its events. ``ping`` None: an SSE comment."""

    ping: Sse | None

    def opening(self, streams: list[RequestStream]) -> list[Sse]:
        """Sent once the jobs are submitted (``streams``, one per job)."""

    def pieces(self, choice: int, piece: Piece, finish: FinishEvent | None) -> list[Sse]:
        """A choice's next piece of text; ``finish`` on its last one."""

    def closing(self, finishes: list[FinishEvent]) -> list[Sse]:
        """After every choice finished; may raise an MlxctlError for how one ended."""

    def error(self, request: web.Request, err: ApiError) -> Sse: ...


async def open_generations(request: web.Request, stack: AsyncExitStack, jobs: Sequence[Any]) -> list[RequestStream]:
    """Submit every job; all are aborted when ``stack`` closes before they finish."""
    return [await stack.enter_async_context(generation(request, job.tokens, job.params, job.cache_salt, job.images))
            for job in jobs]


async def stream_sse(request: web.Request, jobs: Sequence[Any], encoder: Encoder) -> SseResponse:
    """``jobs``: what to generate (``tokens``, ``params``, ``cache_salt``, ``images``, ``echo``);
    one per choice, in order."""
    resp = None
    try:
        async with AsyncExitStack() as stack:
            streams = await open_generations(request, stack, jobs)
            resp = await open_sse(request)
            await _write(request, resp, streams, jobs, encoder)
    except MlxctlError as err:
        await _end(request, resp, encoder, ApiError.from_mlxctl(err))
    except TimeoutError:
        await _end(request, resp, encoder, ApiError(504, TIMEOUT_MESSAGE))
    except ConnectionError:
        if resp is None:
            raise
    return resp


async def _end(request: web.Request, resp: SseResponse | None, encoder: Encoder, err: ApiError) -> None:
    """An error after the stream started is its last event; before, it is the response."""
    if resp is None:
        raise err
    try:
        await _send(resp, [encoder.error(request, err)])
    except ConnectionError:
        pass


async def _send(resp: SseResponse, events: list[Sse]) -> None:
    for event in events:
        await send(resp, event.data, event=event.event)


async def _write(request: web.Request, resp: SseResponse, streams: list[RequestStream], jobs: Sequence[Any],
                 encoder: Encoder) -> None:
    await _send(resp, encoder.opening(streams))
    interval = request.app[SETTINGS].stream_interval
    groupers = [ChunkGrouper(interval, job.params.logprobs, len(job.echo)) for job in jobs]
    finishes: list[FinishEvent | None] = [None] * len(jobs)
    ping = None if encoder.ping is None else (lambda: _send(resp, [encoder.ping]))
    async with aclosing(merge_streams(streams)) as merged, aclosing(kept_alive(request, resp, merged, ping)) as events:
        async for i, event in events:
            finish = event if isinstance(event, FinishEvent) else None
            if finish is not None:
                finishes[i] = finish
            if (piece := groupers[i].add(event, raw=True)) is not None:
                await _send(resp, encoder.pieces(i, piece, finish))
    await _send(resp, encoder.closing(finishes))


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
