"""One configured server's connection state, and one-line accounts of what went wrong with it."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from mlxctl.mcp.config import ServerConfig

if TYPE_CHECKING:
    from mlxctl.mcp.tools import Tool

_STDERR_TAIL_BYTES = 2000


@dataclass
class Connection:
    config: ServerConfig
    state: str = "pending"  # pending, connecting, connected, failed, closed, disabled
    error: str | None = None
    session: Any = None
    server_info: dict[str, Any] | None = None
    tools: list[Tool] = field(default_factory=list)
    unmatched_allow: list[str] = field(default_factory=list)
    connected_at: float | None = None
    task: asyncio.Task | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    scope: Any = None  # the anyio cancel scope around the connection's whole life
    stderr: IO[bytes] | None = None  # captured server stderr (stdio only)
    stderr_mark: int = 0  # where in it the latest event's own output starts
    http_error: str | None = None  # the last HTTP error status the server answered (HTTP only)

    @property
    def name(self) -> str:
        return self.config.name

    async def note_http_response(self, response: Any) -> None:
        if response.status_code >= 400:
            self.http_error = f"HTTP {response.status_code} {getattr(response, 'reason_phrase', '')}".strip()

    def stderr_size(self) -> int:
        if self.stderr is None:
            return 0
        try:
            return os.fstat(self.stderr.fileno()).st_size
        except (OSError, ValueError):
            return 0

    def stderr_tail(self, since: int = 0) -> str:
        """The last line the server wrote to stderr after byte ``since`` (captured stderr only)."""
        if self.stderr is None:
            return ""
        try:
            fd = self.stderr.fileno()
            size = os.fstat(fd).st_size
            start = max(since, size - _STDERR_TAIL_BYTES)
            data = os.pread(fd, size - start, start) if size > start else b""
        except (OSError, ValueError):
            return ""
        lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
        return lines[-1] if lines else ""


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe(exc: BaseException, conn: Connection | None = None, *, with_stderr: bool = True) -> str:
    """One line on what went wrong, with the HTTP status or the server's last stderr line."""
    text = _exception_text(_leaf(exc), conn)
    if conn is not None and conn.http_error:
        text += f" ({conn.http_error})"
        conn.http_error = None
    tail = conn.stderr_tail(conn.stderr_mark) if conn is not None and with_stderr else ""
    if tail:
        text += f" (server stderr: {tail[:300]})"
    return text


def _exception_text(exc: BaseException, conn: Connection | None) -> str:
    message = one_line(exc) if str(exc).strip() else ""
    if isinstance(exc, FileNotFoundError) and conn is not None and conn.config.command:
        return f"command not found: {conn.config.command}"
    if not message:
        return type(exc).__name__
    if isinstance(exc, OSError | TimeoutError) or type(exc).__module__.startswith(("httpx", "httpcore")):
        return f"{type(exc).__name__}: {message}"
    return message
