"""Each server's connection over its whole life: open, initialize, list tools, serve, close.

Each server's connection lives in its own task, which enters and leaves the SDK's transport and
session contexts (anyio requires that one task do both).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable, Iterable
from typing import IO, Any

from mlxctl.mcp.connection import Connection, describe
from mlxctl.mcp.sdk import client_info, dump, open_transport
from mlxctl.mcp.tools import list_tools, make_tools, unmatched_patterns

log = logging.getLogger("mlxctl.mcp")

# How long closing waits for a server to wind down (stdio: stdin closed, then TERM, then KILL).
CLOSE_TIMEOUT = 8.0

Fail = Callable[[Connection, str], None]


def timed_out(connect_timeout: float) -> str:
    return f"failed to start: timed out after {connect_timeout:g}s"


async def run_connection(
    conn: Connection, connect_timeout: float, server_stderr: IO[Any] | None, fail: Fail
) -> None:
    """One server's whole connection: connect, list tools, serve until told to stop."""
    import anyio

    scope = anyio.CancelScope(deadline=anyio.current_time() + connect_timeout)
    conn.scope = scope
    started = time.monotonic()
    try:
        with scope:
            await _serve(conn, scope, server_stderr, started)
        if scope.cancelled_caught and conn.state == "connecting":
            fail(conn, timed_out(connect_timeout))
    except Exception as exc:  # noqa: BLE001 - anything a server does wrong is reported, not raised
        what = "failed to start" if conn.state == "connecting" else "connection lost"
        fail(conn, f"{what}: {describe(exc, conn)}")
    finally:
        conn.session = None
        if conn.state not in ("failed",):
            conn.state = "closed"
        conn.ready.set()


async def _serve(conn: Connection, scope: Any, server_stderr: IO[Any] | None, started: float) -> None:
    from mcp import ClientSession

    async with contextlib.AsyncExitStack() as stack:
        read, write = await open_transport(conn, stack, server_stderr)
        session = await stack.enter_async_context(ClientSession(read, write, client_info=client_info()))
        await _initialize(conn, session)
        if conn.state != "connecting":  # start() gave up on it meanwhile
            return
        scope.deadline = math.inf
        _mark_connected(conn, session, started)
        conn.ready.set()
        await conn.stop.wait()
        conn.session = None


async def _initialize(conn: Connection, session: Any) -> None:
    init = await session.initialize()
    info = getattr(init, "server_info", None) or getattr(init, "serverInfo", None)
    conn.server_info = dump(info) if info is not None else None
    conn.tools = make_tools(conn.config, await list_tools(session))
    conn.unmatched_allow = unmatched_patterns(conn.config, conn.tools)


def _mark_connected(conn: Connection, session: Any, started: float) -> None:
    conn.session = session
    conn.state = "connected"
    conn.connected_at = time.time()
    conn.stderr_mark = conn.stderr_size()
    allowed = sum(t.allowed for t in conn.tools)
    log.info(
        "MCP server %r connected in %.2fs: %d tool(s), %d allowed",
        conn.name,
        time.monotonic() - started,
        len(conn.tools),
        allowed,
    )
    for pattern in conn.unmatched_allow:
        log.warning("MCP server %r: allow pattern %r matches no tool", conn.name, pattern)


async def wait_ready(pending: list[Connection], timeout: float) -> list[Connection]:
    """Wait up to ``timeout`` for the connections to come up or fail; those still starting."""
    if not pending:
        return []
    # Each connection enforces connect_timeout itself; this wait only stops start() from also
    # waiting out the bounded shutdown of a server that timed out (it goes on in its own task,
    # and close() collects it).
    waits = [asyncio.create_task(c.ready.wait()) for c in pending]
    _, not_done = await asyncio.wait(waits, timeout=timeout)
    for waiter in not_done:
        waiter.cancel()
    return [c for c in pending if not c.ready.is_set()]


async def close_connections(connections: Iterable[Connection]) -> None:
    """Tell every running connection to stop, wait (boundedly) for it, and release its stderr."""
    conns = [c for c in connections if c.task is not None]
    for conn in conns:
        conn.stop.set()
    await _wind_down(conns)
    for conn in conns:
        conn.task = None
        if conn.stderr is not None:
            conn.stderr.close()
            conn.stderr = None


async def _wind_down(conns: list[Connection]) -> None:
    """Wait for the tasks; cancel the scopes of those that overrun, then at last the tasks."""
    tasks = [c.task for c in conns if c.task is not None and not c.task.done()]
    if not tasks:
        return
    _, late = await asyncio.wait(tasks, timeout=CLOSE_TIMEOUT)
    for conn in conns:
        if conn.task in late and conn.scope is not None:
            conn.scope.cancel()
    if late:
        _, late = await asyncio.wait(late, timeout=CLOSE_TIMEOUT)
        for task in late:
            task.cancel()
