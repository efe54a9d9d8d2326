"""The one streaming lifecycle of every streamed endpoint (chat, completions, messages,
responses over SSE; Ollama's chat and generate over NDJSON: :data:`NDJSON`).

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
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, aclosing
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from aiohttp import web

from mlxctl.api.openai_pieces import ChunkGrouper, Piece
from mlxctl.engine.events import Event, FinishEvent
from mlxctl.engine.streams import RequestStream
from mlxctl.errors import MlxctlError
from mlxctl.server.errors import ApiError
from mlxctl.server.generate import generation
from mlxctl.server.keepalive import QuietAlarm, kept_alive
from mlxctl.server.keys import SETTINGS
from mlxctl.server.ndjson import open_ndjson, send_line
from mlxctl.server.sse import SseResponse, open_sse, send, send_comment

T = TypeVar("T")
TIMEOUT_MESSAGE = "the request took longer than the server's request timeout"


@dataclass(frozen=True)
class Sse:
    """One server-sent event: its data (a dict is sent as JSON) and its ``event:`` name."""

    data: dict | str
    event: str | None = None


@dataclass(frozen=True)
class Transport:
    """How a stream is framed: opened (status and headers at once), written an event at a time,
    and whether it can carry keep-alives."""

    open: Callable[[web.Request], Awaitable[SseResponse]]
    write: Callable[[SseResponse, Sse], Awaitable[None]]
    keepalive: bool = True


async def _write_sse(resp: SseResponse, event: Sse) -> None:
    await send(resp, event.data, event=event.event)


async def _write_line(resp: SseResponse, event: Sse) -> None:
    await send_line(resp, event.data)


SSE = Transport(open_sse, _write_sse)
NDJSON = Transport(open_ndjson, _write_line, keepalive=False)  # a blank line is no JSON object


class Encoder(Protocol):
    """A protocol's stream: engine pieces -> its events."""

    def keepalive(self) -> Sse | None:
        """The event a silent stream gets (None: an SSE comment, which some clients' idle timers
        do not count)."""

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


async def stream_sse(request: web.Request, jobs: Sequence[Any], encoder: Encoder,
                     transport: Transport = SSE) -> SseResponse:
    """``jobs``: what to generate (``tokens``, ``params``, ``cache_salt``, ``images``, ``echo``);
    one per choice, in order."""

    async def write(stream: StreamSession) -> None:
        async with AsyncExitStack() as stack:
            streams = await open_generations(request, stack, jobs)
            resp = await stream.open()
            await send_events(resp, encoder.opening(streams), transport)
            finishes = await send_pieces(request, resp, streams, jobs, encoder, transport)
            await send_events(resp, encoder.closing(finishes), transport)

    return await stream_lifecycle(request, encoder, write, transport)


class StreamSession:
    """The stream of one request, opened on first need (``resp`` None until then)."""

    def __init__(self, request: web.Request, transport: Transport = SSE):
        self.request, self.transport = request, transport
        self.resp: SseResponse | None = None

    async def open(self) -> SseResponse:
        if self.resp is None:
            self.resp = await self.transport.open(self.request)
        return self.resp


async def stream_lifecycle(request: web.Request, encoder: Encoder, write: Callable[[StreamSession], Awaitable[None]],
                           transport: Transport = SSE) -> SseResponse:
    """Run ``write`` (which opens the stream once the engine took the first job) and end the
    stream the same way for every protocol: an error before it opened is the response, after
    it the encoder's error event; a client that went away ends it quietly."""
    stream = StreamSession(request, transport)
    try:
        await write(stream)
    except MlxctlError as err:
        await _end(request, stream.resp, encoder, ApiError.from_mlxctl(err), transport)
    except ApiError as err:
        await _end(request, stream.resp, encoder, err, transport)
    except TimeoutError:
        await _end(request, stream.resp, encoder, ApiError(504, TIMEOUT_MESSAGE), transport)
    except ConnectionError:
        if stream.resp is None:
            raise
    return stream.resp


async def _end(request: web.Request, resp: SseResponse | None, encoder: Encoder, err: ApiError,
               transport: Transport) -> None:
    """An error after the stream started is its last event; before, it is the response."""
    if resp is None:
        raise err
    try:
        await transport.write(resp, encoder.error(request, err))
    except ConnectionError:
        pass


async def send_events(resp: SseResponse, events: list[Sse], transport: Transport = SSE) -> None:
    for event in events:
        await transport.write(resp, event)


async def send_pieces(request: web.Request, resp: SseResponse, streams: list[RequestStream], jobs: Sequence[Any],
                      encoder: Any, transport: Transport = SSE) -> list[FinishEvent]:
    """Each choice's pieces of ``stream_interval`` tokens as ``encoder.pieces`` maps them, with
    the encoder's keep-alive in every silence (where the transport has them); the finishes."""
    interval = request.app[SETTINGS].stream_interval
    groupers = [ChunkGrouper(interval, job.params.logprobs, len(job.echo)) for job in jobs]
    finishes: list[FinishEvent | None] = [None] * len(jobs)
    merged = Merged(streams)
    alarm = QuietAlarm(request, resp, merged.wake) if transport.keepalive else None
    try:
        while merged.left:
            if (got := await merged.next_or_wake()) is None:  # only the alarm wakes it
                if alarm.due():
                    await pinger(resp, encoder)()
                continue
            i, event = got
            finish = event if isinstance(event, FinishEvent) else None
            if finish is not None:
                finishes[i] = finish
            if (piece := groupers[i].add(event, raw=True)) is not None:
                await send_events(resp, encoder.pieces(i, piece, finish), transport)
    finally:
        merged.close()
        if alarm is not None:
            alarm.cancel()
    return finishes


def pinger(resp: SseResponse, encoder: Any) -> Callable[[], Awaitable[None]]:
    """The encoder's keep-alive event (an SSE comment where it has none)."""

    async def ping() -> None:
        event = encoder.keepalive()
        await (send_comment(resp, "ping") if event is None else send_events(resp, [event]))

    return ping


async def kept_alive_while(request: web.Request, resp: SseResponse, encoder: Any, work: Awaitable[T]) -> T:
    """``work``'s result, with the encoder's keep-alive in every silence while it runs."""

    async def one() -> AsyncIterator[T]:
        yield await work

    async with aclosing(kept_alive(request, resp, one(), pinger(resp, encoder))) as items:
        async for item in items:
            return item
    raise RuntimeError("the work ended without a result")  # pragma: no cover


class Merged:
    """Events of several streams as they come, each with its stream's position in the list. One
    stream (nearly every request) is read directly; several are pumped into one queue."""

    def __init__(self, streams: list[RequestStream]):
        self.streams, self.left = streams, len(streams)  # left: streams not finished yet
        self._queue: asyncio.Queue | None = None
        self._tasks: list[asyncio.Task] = []
        if len(streams) > 1:
            self._queue = asyncio.Queue()
            self._tasks = [asyncio.create_task(_pump(i, s, self._queue)) for i, s in enumerate(streams)]

    def wake(self) -> None:
        """Make the reader waiting in ``next_or_wake`` get None."""
        if self._queue is None:
            self.streams[0].wake()
        else:
            self._queue.put_nowait(None)

    async def next_or_wake(self) -> tuple[int, Event] | None:
        """The next (position, event), or None when ``wake`` came first; a stream's error is
        raised in its place in the order."""
        if self._queue is None:
            event = await self.streams[0].next_or_wake()
            item = None if event is None else (0, event)
        else:
            item = await self._queue.get()
            if item is not None and isinstance(item[1], BaseException):
                raise item[1]
        if item is not None:
            self.left -= isinstance(item[1], FinishEvent)
        return item

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()


async def _pump(index: int, stream: RequestStream, queue: asyncio.Queue) -> None:
    try:
        async for event in stream:
            queue.put_nowait((index, event))
    except Exception as exc:  # noqa: BLE001 - handed to the reader, which raises it in order
        queue.put_nowait((index, exc))
