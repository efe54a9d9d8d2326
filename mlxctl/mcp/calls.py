"""One tool call through the hub: resolved, allow-checked, argument-checked, timed out, audited.

Nothing a model can get wrong raises: an unknown or denied tool, arguments that break the tool's
input schema, a tool that fails or runs out its time each come back as an error
:class:`~mlxctl.mcp.audit.ToolResult` with a message the model can read and act on.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any

from mlxctl.mcp.audit import ToolResult
from mlxctl.mcp.connection import Connection, describe
from mlxctl.mcp.content import render_content
from mlxctl.mcp.sdk import dump
from mlxctl.mcp.tools import schema_problem, server_of

if TYPE_CHECKING:
    from mlxctl.mcp.hub import McpHub

# JSON-RPC code the SDK uses for a connection that closed under a request.
_CONNECTION_CLOSED = -32000
_LISTED_NAMES = 30


class _Call:
    """One call in progress: what it names, and its result, audited once done."""

    def __init__(self, hub: McpHub, name: str, arguments: Any):
        self.started = time.monotonic()
        self.hub = hub
        self.name = name
        self.tool = hub._tools.get(name)
        self.server = self.tool.server if self.tool else server_of(name, hub._connections)
        self.audit_arguments = arguments

    def done(self, text: str, is_error: bool, structured: Any = None) -> ToolResult:
        result = ToolResult(
            text=text,
            is_error=is_error,
            server=self.server,
            tool=self.tool.name if self.tool else None,
            duration_s=round(time.monotonic() - self.started, 4),
            name=self.name,
            structured=structured,
        )
        self.hub._audit(result, self.audit_arguments)
        return result


async def run_call(hub: McpHub, name: str, arguments: dict[str, Any] | str | None) -> ToolResult:
    """Run the tool ``name``; every failure a model could cause or see is an error result."""
    call = _Call(hub, name, arguments)
    refusal = _refusal(call)
    if refusal is not None:
        return call.done(refusal, True)
    parsed, problem = _parse_arguments(call, arguments)
    if problem is not None:
        return call.done(problem, True)
    return await _invoke(call, hub._connections[call.tool.server], parsed)


def _refusal(call: _Call) -> str | None:
    """Why the call cannot go to a server at all; None when it can."""
    if call.tool is None:
        return _unknown(call)
    if not call.tool.allowed:
        return f"Error: tool '{call.name}' is not allowed by the MCP configuration of server '{call.server}'."
    conn = call.hub._connections[call.tool.server]
    if conn.state != "connected" or conn.session is None:
        return _unavailable(call.server, conn)
    return None


def _unavailable(server: str | None, conn: Connection) -> str:
    return f"Error: MCP server '{server}' is not available ({conn.error or conn.state})."


def _unknown(call: _Call) -> str:
    conn = call.hub._connections.get(call.server) if call.server else None
    if conn is not None and conn.state != "connected":
        return _unavailable(call.server, conn)
    names = call.hub.tool_names()
    more = len(names) - _LISTED_NAMES
    available = ", ".join(names[:_LISTED_NAMES]) + (f" and {more} more" if more > 0 else "")
    return f"Error: unknown tool '{call.name}'. Available tools: {available or 'none'}."


def _parse_arguments(call: _Call, arguments: Any) -> tuple[dict[str, Any], str | None]:
    """The arguments as an object (JSON text is parsed), or what is wrong with them."""
    if arguments is None or arguments == "":
        arguments = {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            return (
                {},
                f"Error: arguments for '{call.name}' are not valid JSON: {exc.msg}.",
            )
        call.audit_arguments = arguments
    if not isinstance(arguments, dict):
        return {}, f"Error: arguments for '{call.name}' must be a JSON object."
    problem = schema_problem(call.tool, arguments)
    if problem is not None:
        return {}, f"Error: invalid arguments for '{call.name}': {problem}."
    return arguments, None


async def _invoke(call: _Call, conn: Connection, arguments: dict[str, Any]) -> ToolResult:
    """Send the call within the server's timeout; cancelling it is audited, then re-raised."""
    import anyio

    session = conn.session
    timeout = conn.config.timeout
    conn.stderr_mark = conn.stderr_size()
    try:
        with anyio.fail_after(timeout):
            raw = await session.call_tool(call.tool.name, arguments)
    except TimeoutError:
        return call.done(f"Error: tool '{call.name}' timed out after {timeout:g}s.", True)
    except asyncio.CancelledError:
        call.done("Error: the call was cancelled.", True)
        raise
    except Exception as exc:  # noqa: BLE001 - protocol or transport failure, shown to the model
        return call.done(f"Error: tool '{call.name}' failed: {_failure(call, conn, exc)}", True)
    data = dump(raw)
    text = render_content(data.get("content") or [], data.get("structuredContent"))
    return call.done(text, bool(data.get("isError")), data.get("structuredContent"))


def _failure(call: _Call, conn: Connection, exc: Exception) -> str:
    """What went wrong; a connection that closed under the call fails its server."""
    closed = getattr(getattr(exc, "error", None), "code", None) == _CONNECTION_CLOSED
    detail = describe(exc, conn, with_stderr=closed)
    if closed:
        call.hub._fail(conn, f"connection lost: {detail}")
    return detail
