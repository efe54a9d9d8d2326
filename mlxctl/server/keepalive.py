"""Keep-alives on a streamed response: while a request waits in the queue, prefills or generates
text that is not sent yet, nothing else is written, and clients give up on a silent stream
(Claude Code after about 15 s). ``kept_alive`` reads a view's source of events with a deadline
of ``--sse-ping-interval`` seconds since the response last wrote, and writes the protocol's ping
whenever it passes: an SSE comment by default, the protocol's own event where it has one
(Anthropic's ``ping``, the Responses API's ``response.in_progress``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from aiohttp import web

from mlxctl.server.keys import SETTINGS
from mlxctl.server.sse import SseResponse, send_comment

T = TypeVar("T")
_END = object()


def kept_alive(request: web.Request, resp: SseResponse, items: AsyncIterator[T],
               ping: Callable[[], Awaitable[None]] | None = None) -> AsyncIterator[T]:
    """``items`` as they come, with ``ping()`` (default ``: ping``) after each silence of the interval."""
    interval = request.app[SETTINGS].sse_ping_interval_s
    if interval <= 0:
        return items
    return _pinged(items, resp, interval, ping or (lambda: send_comment(resp, "ping")))


class QuietAlarm:
    """Calls ``wake`` whenever ``resp`` has been silent for ``--sse-ping-interval`` seconds (never
    when that is 0): one timer per interval, not a deadline on every read. The woken reader
    checks ``due()`` (events may have been written since) and pings."""

    def __init__(self, request: web.Request, resp: SseResponse, wake: Callable[[], None]):
        self.resp, self.wake = resp, wake
        self.interval = request.app[SETTINGS].sse_ping_interval_s
        self._loop = asyncio.get_running_loop()
        self._handle = self._loop.call_at(resp.last_write + self.interval, self._fire) if self.interval > 0 else None

    def due(self) -> bool:
        return self.interval > 0 and self._loop.time() - self.resp.last_write >= self.interval

    def _fire(self) -> None:
        if self.due():
            self.wake()
            self._handle = self._loop.call_later(self.interval, self._fire)
        else:
            self._handle = self._loop.call_at(self.resp.last_write + self.interval, self._fire)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()


async def _pinged(items: AsyncIterator[T], resp: SseResponse, interval: float,
                  ping: Callable[[], Awaitable[None]]) -> AsyncIterator[T]:
    loop, source, pending = asyncio.get_running_loop(), aiter(items), None
    try:
        while True:
            pending = pending or asyncio.ensure_future(_next(source))  # kept across pings: never cancelled
            quiet_for = loop.time() - resp.last_write
            done, _ = await asyncio.wait({pending}, timeout=max(0.0, interval - quiet_for))
            if not done:
                await ping()
                continue
            item, pending = pending.result(), None
            if item is _END:
                return
            yield item
    finally:
        if pending is not None:  # the view left early: stop the read before its source is closed
            pending.cancel()
            await asyncio.wait({pending})


async def _next(source: AsyncIterator[T]) -> object:
    try:
        return await anext(source)
    except StopAsyncIteration:
        return _END
