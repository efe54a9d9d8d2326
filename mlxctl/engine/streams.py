"""Per-request streams: the bridge from the engine thread to its consumer.

The engine thread calls :meth:`RequestStream.put`; a CLI reads with a plain ``for`` loop, an
asyncio server with ``async for``. An engine error arrives as a finish event carrying the
exception, which is raised on the consumer's side.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import AsyncIterator, Callable, Iterator

from mlxctl.engine.events import Event, FinishEvent, FinishReason, Timings, TokenEvent, TokenLogprob, Usage

_WAKE = object()  # put by RequestStream.wake: not an event
_outbox = threading.local()  # .held: events for async streams, put inside ``delivered_together``


@contextmanager
def delivered_together() -> Iterator[None]:
    """Hold the events this thread puts to async streams and hand each event loop its share in
    one callback at the end (in the order they were put): one wake-up of a server's loop per
    engine step, not one per token of every stream. Sync streams get theirs at once."""
    _outbox.held = []
    try:
        yield
    finally:
        deliver_held()
        _outbox.held = None


def deliver_held() -> None:
    """Hand over what ``delivered_together`` holds so far, now (a step that runs several
    passes, engine/speculative_chain.py's chained checks, delivers each one's tokens as they
    come)."""
    held = getattr(_outbox, "held", None)
    if not held:
        return
    _outbox.held = []
    by_loop: dict[asyncio.AbstractEventLoop, list] = {}
    for stream, event in held:
        by_loop.setdefault(stream._loop, []).append((stream._async, event))
    for loop, items in by_loop.items():
        if not loop.is_closed():
            loop.call_soon_threadsafe(_put_all, items)


def _put_all(items: list) -> None:
    for target, event in items:
        target.put_nowait(event)


@dataclass(frozen=True)
class Completion:
    """A whole request's result, gathered from its stream."""

    text: str
    token_ids: tuple[int, ...]
    finish_reason: FinishReason
    usage: Usage
    timings: Timings
    logprobs: tuple[TokenLogprob, ...] | None = None
    stop_string: str | None = None


class RequestStream:
    """Events of one request. Iterate it (sync) or ``async for`` it, not both."""

    def __init__(self, request_id: str, on_abort: Callable[[str], None], loop: asyncio.AbstractEventLoop | None = None):
        self.request_id = request_id
        self._on_abort = on_abort
        self._loop = loop
        self._sync: queue.SimpleQueue[Event] = queue.SimpleQueue()
        self._async: asyncio.Queue[Event] | None = asyncio.Queue() if loop else None
        self.finish: FinishEvent | None = None
        # prompt tokens the prefix cache serves: set on the engine thread when the request is
        # scheduled, so known once its first event has come
        self.cached_tokens = 0

    def put(self, event: Event) -> None:
        """Called on the engine thread."""
        if self._loop is None:
            self._sync.put(event)
        elif (held := getattr(_outbox, "held", None)) is not None:
            held.append((self, event))
        elif not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._async.put_nowait, event)

    def abort(self) -> None:
        """Ask the engine to stop this request; its stream then ends with reason ``abort``."""
        if self.finish is None:
            self._on_abort(self.request_id)

    def _accept(self, event: Event) -> Event:
        if isinstance(event, FinishEvent):
            self.finish = event
            if event.error is not None:
                raise event.error
        return event

    def __iter__(self) -> Iterator[Event]:
        while self.finish is None:
            yield self._accept(self._sync.get())

    async def __aiter__(self) -> AsyncIterator[Event]:
        while self.finish is None:
            if (event := await self._async.get()) is not _WAKE:
                yield self._accept(event)

    def wake(self) -> None:
        """Make the reader waiting in ``next_or_wake`` get None (call on the stream's loop)."""
        self._async.put_nowait(_WAKE)

    async def next_or_wake(self) -> Event | None:
        """The next event (async streams), or None when ``wake`` came first. A streamed response
        reads every token this way: a keep-alive timer wakes it, where a deadline on each read
        (a timer per token) cost the event loop more than the read itself."""
        event = await self._async.get()
        return None if event is _WAKE else self._accept(event)

    def collect(self) -> Completion:
        """Read the stream to its end and return the whole result (sync streams)."""
        return gather_events(list(self))

    async def collect_async(self) -> Completion:
        return gather_events([e async for e in self])


def gather_events(events: list[Event]) -> Completion:
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    finish = events[-1]
    logprobs = None
    if tokens and tokens[0].logprobs is not None:
        logprobs = tuple(lp for e in tokens for lp in (e.logprobs or ()))
    return Completion(
        text="".join(e.text for e in tokens) + finish.text,
        token_ids=tuple(t for e in tokens for t in e.token_ids),
        finish_reason=finish.reason,
        usage=finish.usage,
        timings=finish.timings,
        logprobs=logprobs,
        stop_string=finish.stop_string,
    )
