"""Connection limits: a deadline for each request's headers and a cap on open connections.

The header deadline is aiohttp's keep-alive timer: it closes a connection still waiting for a
complete request line and headers ``header_timeout_s`` after the connection opened or after
its previous response ended, so a client trickling headers (slowloris) or idling on a
keep-alive connection is closed. Once the headers are in, the timer is out of the way: a body
that is still arriving, a long request and a streamed response are not cut.

Past ``max_connections`` open connections, a new one gets a 503 and is closed at once rather
than queued: the request is not read yet, so its body has both protocols' error shape.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

REFUSED_LINGER_S = 2.0  # a refused client's time to read the 503 before its connection is dropped


def runner_options(settings: Any) -> dict[str, Any]:
    """web.AppRunner options for the limits (``settings``: ServeSettings)."""
    return {"keepalive_timeout": settings.header_timeout_s}


class CappedSite(web.TCPSite):
    """A TCPSite whose protocol factory is a :class:`ConnectionCap` over the runner's server
    (TCPSite.start as in aiohttp 3.14, with that one argument changed)."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, max_connections: int):
        super().__init__(runner, host, port)
        self.max_connections = max_connections

    async def start(self) -> None:
        await web.BaseSite.start(self)
        assert self._runner.server is not None
        self._server = await asyncio.get_running_loop().create_server(
            ConnectionCap(self._runner.server, self.max_connections), self._host, self._port,
            backlog=self._backlog, reuse_address=self._reuse_address, reuse_port=self._reuse_port)
        sockets = self._server.sockets
        self._bound_port = sockets[0].getsockname()[1] if sockets else self._port


class ConnectionCap:
    """A protocol factory: aiohttp's handler for each connection while fewer than ``limit``
    are open, a :class:`Refused` protocol past that."""

    def __init__(self, factory: Callable[[], asyncio.Protocol], limit: int):
        self.factory, self.limit, self.open = factory, limit, 0

    def __call__(self) -> asyncio.Protocol:
        if self.open >= self.limit:
            return Refused(self.limit)
        self.open += 1
        return Counted(self.factory(), self._closed)

    def _closed(self) -> None:
        self.open -= 1


class Counted(asyncio.Protocol):
    """``inner`` as the connection's protocol, calling ``on_lost`` once the connection ends."""

    def __init__(self, inner: asyncio.Protocol, on_lost: Callable[[], None]):
        self.inner, self.on_lost = inner, on_lost

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self.on_lost()
        self.inner.connection_lost(exc)


class Refused(asyncio.Protocol):
    """Answers 503 at once, then reads and drops whatever the client sends (closing with its
    request unread could reset the connection before the 503 is read) until it closes, or for
    REFUSED_LINGER_S at most."""

    def __init__(self, limit: int):
        self.limit = limit

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.write(refusal(self.limit))
        if transport.can_write_eof():
            transport.write_eof()
        asyncio.get_running_loop().call_later(REFUSED_LINGER_S, transport.close)

    def eof_received(self) -> bool:
        return False  # closes the transport


def refusal(limit: int) -> bytes:
    """The whole 503 response; the body reads as an OpenAI error and as an Anthropic one."""
    message = f"too many connections: the server holds {limit} at most (--max-connections); retry shortly"
    body = json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": message,
                                                  "param": None, "code": "too_many_connections"}}).encode()
    head = ("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
            f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n")
    return head.encode() + body
