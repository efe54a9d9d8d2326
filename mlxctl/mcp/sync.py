"""A blocking face on :class:`~mlxctl.mcp.hub.McpHub`, for the CLI (``mlxctl run --mcp-config``).

The hub runs on an event loop of its own in a daemon thread; ``tools()``, ``call()`` and
``status()`` block the caller until the loop answers. Ctrl-C while a call blocks cancels the call.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from typing import IO, Any, Self, TypeVar

from mlxctl.mcp.config import McpConfig
from mlxctl.mcp.hub import DEFAULT_CONNECT_TIMEOUT, McpHub, ToolResult

T = TypeVar("T")


class McpHubThread:
    """``with McpHubThread(config) as hub: hub.call("calc__add", {"a": 1, "b": 2})``."""

    def __init__(
        self,
        config: McpConfig | str | os.PathLike[str],
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        audit_log: str | os.PathLike[str] | None = None,
        server_stderr: IO[Any] | None = None,
    ):
        # Built here so config errors surface in the caller's thread, before any thread starts.
        self.hub = McpHub(
            config, connect_timeout=connect_timeout, audit_log=audit_log, server_stderr=server_stderr
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self) -> None:
        """Start the loop thread and connect to every server (blocks until done or timed out)."""
        if self._loop is not None:
            return
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=self._serve, args=(loop,), name="mlxctl-mcp", daemon=True)
        self._loop, self._thread = loop, thread
        thread.start()
        try:
            self._wait(self.hub.start())
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _serve(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        loop.run_forever()

    def close(self) -> None:
        """Disconnect every server and stop the loop thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self._loop = self._thread = None
        try:
            if thread.is_alive():
                asyncio.run_coroutine_threadsafe(self.hub.close(), loop).result()
        finally:
            if thread.is_alive():
                loop.call_soon_threadsafe(loop.stop)
                thread.join(timeout=10)
            if not thread.is_alive():
                _finish(loop)

    def _wait(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            coro.close()
            raise RuntimeError("McpHubThread is not started")
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def _on_loop(self, fn: Any) -> Any:
        async def run() -> Any:
            return fn()

        return self._wait(run())

    @property
    def errors(self) -> dict[str, str]:
        return self._on_loop(lambda: self.hub.errors)

    def tools(self) -> list[dict[str, Any]]:
        """The allowed tools, in OpenAI ``tools`` format."""
        return self._on_loop(self.hub.tools)

    def status(self) -> list[dict[str, Any]]:
        return self._on_loop(self.hub.status)

    def call(self, qualified_name: str, arguments: dict[str, Any] | str | None = None) -> ToolResult:
        """Run one tool and block for its result (see :meth:`McpHub.call`)."""
        return self._wait(self.hub.call(qualified_name, arguments))


def _finish(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is left on a stopped loop and close it."""
    try:
        pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()
