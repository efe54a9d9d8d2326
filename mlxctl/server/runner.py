"""Running the application: on the caller's loop (serve) or in a background thread (tests, TUI)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from aiohttp import web

from mlxctl.server.connections import CappedSite, runner_options
from mlxctl.server.keys import SETTINGS


@dataclass
class BackgroundServer:
    """An app served on loopback from its own thread and event loop."""

    app: web.Application
    host: str = "127.0.0.1"
    port: int = 0

    def __post_init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mlxctl-http", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> BackgroundServer:
        if self.port == 0:
            self.port = free_port(self.host)
        self._thread.start()
        self._started.wait(30)
        return self

    def submit(self, coro) -> concurrent.futures.Future:
        """Run a coroutine on the server's loop (e.g. lifecycle.drain in tests)."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        settings = self.app[SETTINGS]
        self._runner = web.AppRunner(self.app, handler_cancellation=True, **runner_options(settings))
        self._loop.run_until_complete(self._runner.setup())
        site = CappedSite(self._runner, self.host, self.port, settings.max_connections)
        self._loop.run_until_complete(site.start())
        self._started.set()
        self._loop.run_forever()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@contextmanager
def served_engine(engine, name: str) -> Iterator[str]:
    """``engine`` served as model ``name`` on a loopback port for the block; yields its URL
    (what ``mlxctl model qualify`` checks the APIs through)."""
    from mlxctl.server.app import init_app
    from mlxctl.server.settings import ServeSettings

    server = BackgroundServer(init_app(engine, ServeSettings(model_name=name))).start()
    try:
        yield server.url
    finally:
        server.stop()
