"""A hub of MCP client connections: every configured server's tools behind one call.

``McpHub`` connects to every enabled server of an :class:`~mlxctl.mcp.config.McpConfig` at once
(stdio servers as subprocesses, others over streamable HTTP), each within ``connect_timeout``. A
server that fails to come up is kept in :attr:`McpHub.errors` and logged; the rest serve on.

Tools are offered to a model as ``<server>__<tool>`` in OpenAI's ``tools`` format, allowed tools
only. :meth:`McpHub.call` never raises for anything a model can get wrong (an unknown or denied
tool, arguments that break the tool's input schema, a tool that fails or runs out its time): it
returns a :class:`ToolResult` with ``is_error`` set and a message the model can read and act on.
Every call is audited as one JSON line, to the ``mlxctl.mcp`` logger and to an optional file.

Each server's connection lives in its own task (:mod:`mlxctl.mcp.session`); calls are requests
sent through the session from whichever task makes them (:mod:`mlxctl.mcp.calls`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from pathlib import Path
from typing import IO, Any, Self

from mlxctl.mcp.audit import ToolResult, write_audit
from mlxctl.mcp.calls import run_call
from mlxctl.mcp.config import McpConfig, load_config
from mlxctl.mcp.connection import Connection
from mlxctl.mcp.sdk import import_sdk
from mlxctl.mcp.session import CLOSE_TIMEOUT, close_connections, run_connection, timed_out, wait_ready
from mlxctl.mcp.status import server_status
from mlxctl.mcp.tools import SEPARATOR, Tool

__all__ = ["CLOSE_TIMEOUT", "DEFAULT_CONNECT_TIMEOUT", "SEPARATOR", "McpHub", "ToolResult"]

log = logging.getLogger("mlxctl.mcp")

DEFAULT_CONNECT_TIMEOUT = 20.0


class McpHub:
    """Connections to every configured MCP server, with their tools behind one allow-listed call.

    Use as ``async with McpHub(config) as hub:`` (or ``await hub.start()`` / ``await hub.close()``).
    ``config`` is an :class:`McpConfig` or a path to a config file. ``audit_log`` names a file that
    gets one JSON line per call. ``server_stderr`` is where stdio servers' stderr goes: None (the
    default) keeps it in a temporary file whose last line explains a server that dies; pass a file
    such as ``sys.stderr`` to pass it through.
    """

    def __init__(
        self,
        config: McpConfig | str | os.PathLike[str],
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        audit_log: str | os.PathLike[str] | None = None,
        server_stderr: IO[Any] | None = None,
    ):
        self.config = config if isinstance(config, McpConfig) else load_config(config)
        self.connect_timeout = connect_timeout
        self.audit_log = Path(audit_log) if audit_log is not None else None
        self._server_stderr = server_stderr
        self._connections: dict[str, Connection] = {
            name: Connection(server, state="disabled" if server.disabled else "pending")
            for name, server in self.config.servers.items()
        }
        self._tools: dict[str, Tool] = {}
        self._audit_lock = threading.Lock()
        self._started = False

    # ---- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        try:
            await self.start()
        except BaseException:
            await asyncio.shield(self.close())
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect to every enabled server at once; returns when each is connected or has failed."""
        if self._started:
            return
        self._started = True
        import_sdk()
        pending = [c for c in self._connections.values() if c.state == "pending"]
        for conn in pending:
            conn.state = "connecting"
            conn.task = asyncio.create_task(self._run(conn), name=f"mcp:{conn.name}")
        for conn in await wait_ready(pending, self.connect_timeout + 0.5):
            self._fail(conn, timed_out(self.connect_timeout))
        self._rebuild_tools()
        connected = sum(c.state == "connected" for c in self._connections.values())
        log.info(
            "MCP hub: %d of %d server(s) connected, %d tool(s) allowed",
            connected,
            len(pending),
            len(self.tools()),
        )

    async def close(self) -> None:
        """Disconnect from every server (stdio servers are stopped)."""
        await close_connections(self._connections.values())
        self._tools = {}

    async def _run(self, conn: Connection) -> None:
        await run_connection(conn, self.connect_timeout, self._server_stderr, self._fail)

    def _fail(self, conn: Connection, message: str) -> None:
        if conn.state == "failed":
            return
        conn.state = "failed"
        conn.error = message
        conn.session = None
        log.warning("MCP server %r: %s", conn.name, message)
        self._rebuild_tools()

    def _rebuild_tools(self) -> None:
        connected = (conn for conn in self._connections.values() if conn.state == "connected")
        self._tools = {tool.qualified: tool for conn in connected for tool in conn.tools}

    # ---- what the model sees ---------------------------------------------------------------

    @property
    def errors(self) -> dict[str, str]:
        """Servers that failed (to start, or later), by name, with what went wrong."""
        return {
            name: conn.error or "failed" for name, conn in self._connections.items() if conn.state == "failed"
        }

    def tools(self) -> list[dict[str, Any]]:
        """The allowed tools of every connected server, in OpenAI ``tools`` format."""
        return [tool.openai() for tool in self._tools.values() if tool.allowed]

    def tool_names(self) -> list[str]:
        return [tool.qualified for tool in self._tools.values() if tool.allowed]

    def status(self) -> list[dict[str, Any]]:
        """Per-server state, for ``/v1/mcp/tools`` and ``mlxctl`` status output."""
        return [server_status(conn) for conn in self._connections.values()]

    # ---- calls ----------------------------------------------------------------------------

    async def call(self, qualified_name: str, arguments: dict[str, Any] | str | None = None) -> ToolResult:
        """Run one tool; every failure a model could cause or see comes back as an error result.

        ``arguments`` may also be the JSON text of an object (as in OpenAI ``tool_calls``).
        Cancelling the awaiting task cancels the call (and is audited as such).
        """
        return await run_call(self, qualified_name, arguments)

    def _audit(self, result: ToolResult, arguments: Any) -> None:
        write_audit(result, arguments, self.audit_log, self._audit_lock)
