"""A hub of MCP client connections: every configured server's tools behind one call.

``McpHub`` connects to every enabled server of an :class:`~mlxctl.mcp.config.McpConfig` at once
(stdio servers as subprocesses, others over streamable HTTP), each within ``connect_timeout``. A
server that fails to come up is kept in :attr:`McpHub.errors` and logged; the rest serve on.

Tools are offered to a model as ``<server>__<tool>`` in OpenAI's ``tools`` format, allowed tools
only. :meth:`McpHub.call` never raises for anything a model can get wrong (an unknown or denied
tool, arguments that break the tool's input schema, a tool that fails or runs out its time): it
returns a :class:`ToolResult` with ``is_error`` set and a message the model can read and act on.
Every call is audited as one JSON line, to the ``mlxctl.mcp`` logger and to an optional file.

Each server's connection lives in its own task, which enters and leaves the SDK's transport and
session contexts (anyio requires that one task do both); calls are requests sent through the
session from whichever task makes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import re
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Self
from urllib.parse import urlsplit, urlunsplit

from mlxctl.errors import UnavailableError
from mlxctl.mcp.config import McpConfig, ServerConfig, load_config

log = logging.getLogger("mlxctl.mcp")

DEFAULT_CONNECT_TIMEOUT = 20.0
# How long closing waits for a server to wind down (stdio: stdin closed, then TERM, then KILL).
CLOSE_TIMEOUT = 8.0
SEPARATOR = "__"
_MAX_LISTING_PAGES = 100
_STDERR_TAIL_BYTES = 2000
_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
# JSON-RPC code the SDK uses for a connection that closed under a request.
_CONNECTION_CLOSED = -32000


@dataclass
class ToolResult:
    """What one tool call came to, ready to hand back to a model as the tool message."""

    text: str
    is_error: bool
    server: str | None
    tool: str | None
    duration_s: float
    name: str = ""  # the qualified name the call asked for
    structured: Any = None  # the server's structuredContent, if it sent any

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "server": self.server,
            "tool": self.tool,
            "text": self.text,
            "is_error": self.is_error,
            "duration_s": self.duration_s,
        }


@dataclass
class _Tool:
    qualified: str
    server: str
    name: str  # the server's own name for it
    description: str
    schema: dict[str, Any]
    allowed: bool
    validator: Any = None  # a compiled jsonschema validator; None when the schema is unusable

    def openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.qualified,
                "description": self.description,
                "parameters": self.schema,
            },
        }


@dataclass
class _Connection:
    config: ServerConfig
    state: str = "pending"  # pending, connecting, connected, failed, closed, disabled
    error: str | None = None
    session: Any = None
    server_info: dict[str, Any] | None = None
    tools: list[_Tool] = field(default_factory=list)
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
        self._connections: dict[str, _Connection] = {
            name: _Connection(server, state="disabled" if server.disabled else "pending")
            for name, server in self.config.servers.items()
        }
        self._tools: dict[str, _Tool] = {}
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
        _import_sdk()
        pending = [c for c in self._connections.values() if c.state == "pending"]
        for conn in pending:
            conn.state = "connecting"
            conn.task = asyncio.create_task(self._run(conn), name=f"mcp:{conn.name}")
        if pending:
            # Each connection enforces connect_timeout itself; this wait only stops start() from
            # also waiting out the bounded shutdown of a server that timed out (it goes on in its
            # own task, and close() collects it).
            waits = [asyncio.create_task(c.ready.wait()) for c in pending]
            _, not_done = await asyncio.wait(waits, timeout=self.connect_timeout + 0.5)
            for waiter in not_done:
                waiter.cancel()
            for conn in pending:
                if not conn.ready.is_set():
                    self._fail(conn, f"failed to start: timed out after {self.connect_timeout:g}s")
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
        conns = [c for c in self._connections.values() if c.task is not None]
        for conn in conns:
            conn.stop.set()
        tasks = [c.task for c in conns if c.task is not None and not c.task.done()]
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=CLOSE_TIMEOUT)
            for conn in conns:
                if conn.task in late and conn.scope is not None:
                    conn.scope.cancel()
            if late:
                _, late = await asyncio.wait(late, timeout=CLOSE_TIMEOUT)
                for task in late:
                    task.cancel()
        for conn in conns:
            conn.task = None
            if conn.stderr is not None:
                conn.stderr.close()
                conn.stderr = None
        self._tools = {}

    async def _run(self, conn: _Connection) -> None:
        """One server's whole connection: connect, list tools, serve until told to stop."""
        import anyio
        from mcp import ClientSession

        cfg = conn.config
        scope = anyio.CancelScope(deadline=anyio.current_time() + self.connect_timeout)
        conn.scope = scope
        started = time.monotonic()
        try:
            with scope:
                async with contextlib.AsyncExitStack() as stack:
                    read, write = await self._open_transport(conn, stack)
                    session = await stack.enter_async_context(
                        ClientSession(read, write, client_info=_client_info())
                    )
                    init = await session.initialize()
                    info = getattr(init, "server_info", None) or getattr(init, "serverInfo", None)
                    conn.server_info = _dump(info) if info is not None else None
                    conn.tools = _make_tools(cfg, await _list_tools(session))
                    conn.unmatched_allow = _unmatched_patterns(cfg, conn.tools)
                    if conn.state != "connecting":  # start() gave up on it meanwhile
                        return
                    scope.deadline = math.inf
                    conn.session = session
                    conn.state = "connected"
                    conn.connected_at = time.time()
                    conn.stderr_mark = conn.stderr_size()
                    allowed = sum(t.allowed for t in conn.tools)
                    log.info(
                        "MCP server %r connected in %.2fs: %d tool(s), %d allowed",
                        cfg.name,
                        time.monotonic() - started,
                        len(conn.tools),
                        allowed,
                    )
                    for pattern in conn.unmatched_allow:
                        log.warning("MCP server %r: allow pattern %r matches no tool", cfg.name, pattern)
                    conn.ready.set()
                    await conn.stop.wait()
                    conn.session = None
            if scope.cancelled_caught and conn.state == "connecting":
                self._fail(conn, f"failed to start: timed out after {self.connect_timeout:g}s")
        except Exception as exc:  # noqa: BLE001 - anything a server does wrong is reported, not raised
            what = "failed to start" if conn.state == "connecting" else "connection lost"
            self._fail(conn, f"{what}: {_describe(exc, conn)}")
        finally:
            conn.session = None
            if conn.state not in ("failed",):
                conn.state = "closed"
            conn.ready.set()

    async def _open_transport(self, conn: _Connection, stack: contextlib.AsyncExitStack) -> tuple[Any, Any]:
        cfg = conn.config
        if cfg.command is not None:
            from mcp.client.stdio import (
                StdioServerParameters,
                get_default_environment,
                stdio_client,
            )

            errlog = self._server_stderr
            if errlog is None:
                conn.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the server
                errlog = conn.stderr
            params = StdioServerParameters(
                command=cfg.command,
                args=list(cfg.args),
                env={**get_default_environment(), **cfg.env},
                cwd=cfg.cwd,
            )
            streams = await stack.enter_async_context(stdio_client(params, errlog=errlog))
        else:
            from mcp.client import streamable_http

            if hasattr(streamable_http, "streamable_http_client"):
                from mcp.shared._httpx_utils import create_mcp_http_client

                client = create_mcp_http_client(headers=cfg.headers or None)
                client.event_hooks["response"].append(conn.note_http_response)
                client = await stack.enter_async_context(client)
                streams = await stack.enter_async_context(
                    streamable_http.streamable_http_client(cfg.url, http_client=client)
                )
            else:  # the SDK's older spelling (mcp 1.x before streamable_http_client)
                streams = await stack.enter_async_context(
                    streamable_http.streamablehttp_client(cfg.url, headers=cfg.headers or None)
                )
        return streams[0], streams[1]

    def _fail(self, conn: _Connection, message: str) -> None:
        if conn.state == "failed":
            return
        conn.state = "failed"
        conn.error = message
        conn.session = None
        log.warning("MCP server %r: %s", conn.name, message)
        self._rebuild_tools()

    def _rebuild_tools(self) -> None:
        tools: dict[str, _Tool] = {}
        for conn in self._connections.values():
            if conn.state != "connected":
                continue
            for tool in conn.tools:
                tools[tool.qualified] = tool
        self._tools = tools

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
        out = []
        for conn in self._connections.values():
            cfg = conn.config
            entry: dict[str, Any] = {
                "name": cfg.name,
                "transport": cfg.transport,
                "state": conn.state,
                "error": conn.error,
                "call_timeout_s": cfg.timeout,
                "server_info": conn.server_info,
                "tools": [
                    {"name": t.qualified, "tool": t.name, "allowed": t.allowed, "description": t.description}
                    for t in conn.tools
                ],
            }
            if cfg.command is not None:
                entry["command"] = cfg.command
            else:
                entry["url"] = _redact_url(cfg.url or "")
            if cfg.allow is not None:
                entry["allow"] = list(cfg.allow)
                if conn.unmatched_allow:
                    entry["allow_unmatched"] = list(conn.unmatched_allow)
            out.append(entry)
        return out

    # ---- calls ----------------------------------------------------------------------------

    async def call(self, qualified_name: str, arguments: dict[str, Any] | str | None = None) -> ToolResult:
        """Run one tool; every failure a model could cause or see comes back as an error result.

        ``arguments`` may also be the JSON text of an object (as in OpenAI ``tool_calls``).
        Cancelling the awaiting task cancels the call (and is audited as such).
        """
        started = time.monotonic()
        tool = self._tools.get(qualified_name)
        server = tool.server if tool else _server_of(qualified_name, self._connections)
        tool_name = tool.name if tool else None
        args_for_audit: Any = arguments

        def done(text: str, is_error: bool, structured: Any = None) -> ToolResult:
            result = ToolResult(
                text=text,
                is_error=is_error,
                server=server,
                tool=tool_name,
                duration_s=round(time.monotonic() - started, 4),
                name=qualified_name,
                structured=structured,
            )
            self._audit(result, args_for_audit)
            return result

        if tool is None:
            conn = self._connections.get(server) if server else None
            if conn is not None and conn.state != "connected":
                return done(
                    f"Error: MCP server '{server}' is not available ({conn.error or conn.state}).", True
                )
            names = self.tool_names()
            available = ", ".join(names[:30]) + (f" and {len(names) - 30} more" if len(names) > 30 else "")
            return done(
                f"Error: unknown tool '{qualified_name}'. Available tools: {available or 'none'}.", True
            )
        if not tool.allowed:
            return done(
                f"Error: tool '{qualified_name}' is not allowed by the MCP configuration of server '{server}'.",
                True,
            )
        conn = self._connections[tool.server]
        session = conn.session
        if conn.state != "connected" or session is None:
            return done(f"Error: MCP server '{server}' is not available ({conn.error or conn.state}).", True)

        if arguments is None or arguments == "":
            arguments = {}
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError as exc:
                return done(f"Error: arguments for '{qualified_name}' are not valid JSON: {exc.msg}.", True)
            args_for_audit = arguments
        if not isinstance(arguments, dict):
            return done(f"Error: arguments for '{qualified_name}' must be a JSON object.", True)
        problem = _schema_problem(tool, arguments)
        if problem is not None:
            return done(f"Error: invalid arguments for '{qualified_name}': {problem}.", True)

        import anyio

        timeout = conn.config.timeout
        conn.stderr_mark = conn.stderr_size()
        try:
            with anyio.fail_after(timeout):
                raw = await session.call_tool(tool.name, arguments)
        except TimeoutError:
            return done(f"Error: tool '{qualified_name}' timed out after {timeout:g}s.", True)
        except asyncio.CancelledError:
            done("Error: the call was cancelled.", True)
            raise
        except Exception as exc:  # noqa: BLE001 - protocol or transport failure, shown to the model
            closed = getattr(getattr(exc, "error", None), "code", None) == _CONNECTION_CLOSED
            detail = _describe(exc, conn, with_stderr=closed)
            if closed:
                self._fail(conn, f"connection lost: {detail}")
            return done(f"Error: tool '{qualified_name}' failed: {detail}", True)
        data = _dump(raw)
        text = _render_content(data.get("content") or [], data.get("structuredContent"))
        return done(text, bool(data.get("isError")), data.get("structuredContent"))

    def _audit(self, result: ToolResult, arguments: Any) -> None:
        record = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "name": result.name,
            "server": result.server,
            "tool": result.tool,
            "arguments": arguments,
            "is_error": result.is_error,
            "duration_s": result.duration_s,
            "result_chars": len(result.text),
        }
        line = json.dumps(record, ensure_ascii=False, default=str)
        log.info("mcp call %s", line)
        if self.audit_log is None:
            return
        try:
            with self._audit_lock, open(self.audit_log, "a", encoding="utf-8") as f:
                f.write(line + "\n")
        except OSError as exc:
            log.error("cannot write MCP audit log %s: %s", self.audit_log, exc)


# ---- helpers ---------------------------------------------------------------------------------


def _import_sdk() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        if exc.name == "mcp":
            raise UnavailableError(
                "MCP tools need the 'mcp' Python package, which is not installed",
                hint="pip install 'mcp>=2.3,<3'",
            ) from None
        raise UnavailableError(
            f"the installed 'mcp' package cannot be imported: {_one_line(exc)}",
            hint="reinstall it: pip install --upgrade 'mcp>=2.3,<3'",
        ) from None


def _client_info() -> Any:
    from mcp.types import Implementation

    from mlxctl import __version__

    return Implementation(name="mlxctl", version=__version__)


def _dump(model: Any) -> dict[str, Any]:
    """An SDK model as its wire-format dict (camelCase keys in every SDK version)."""
    if isinstance(model, dict):
        return model
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def _list_tools(session: Any) -> list[dict[str, Any]]:
    import inspect

    from mcp.types import PaginatedRequestParams

    takes_params = "params" in inspect.signature(session.list_tools).parameters
    tools: list[dict[str, Any]] = []
    cursor = None
    for _ in range(_MAX_LISTING_PAGES):
        if cursor is None:
            result = await session.list_tools()
        elif takes_params:
            result = await session.list_tools(params=PaginatedRequestParams(cursor=cursor))
        else:
            result = await session.list_tools(cursor)
        data = _dump(result)
        tools.extend(data.get("tools") or [])
        cursor = data.get("nextCursor")
        if not cursor:
            break
    return tools


def _make_tools(cfg: ServerConfig, listed: list[dict[str, Any]]) -> list[_Tool]:
    from jsonschema import exceptions as schema_exceptions
    from jsonschema import validators

    tools: list[_Tool] = []
    seen: set[str] = set()
    for item in listed:
        name = item.get("name")
        if not isinstance(name, str) or not name:
            continue
        qualified = f"{cfg.name}{SEPARATOR}{_UNSAFE_NAME_CHARS.sub('_', name)}"
        if qualified in seen:
            log.warning(
                "MCP server %r: tool %r clashes with another as %r; skipped", cfg.name, name, qualified
            )
            continue
        seen.add(qualified)
        schema = item.get("inputSchema")
        if not isinstance(schema, dict):
            schema = {"type": "object", "properties": {}}
        validator = None
        try:
            cls = validators.validator_for(schema, default=validators.Draft202012Validator)
            cls.check_schema(schema)
            validator = cls(schema)
        except schema_exceptions.SchemaError as exc:
            log.warning(
                "MCP server %r: tool %r has an invalid input schema (%s); arguments go unchecked",
                cfg.name,
                name,
                exc.message,
            )
        description = item.get("description") or item.get("title") or f"{name} (from MCP server {cfg.name})"
        tools.append(
            _Tool(
                qualified=qualified,
                server=cfg.name,
                name=name,
                description=description,
                schema=schema,
                allowed=cfg.allows(name),
                validator=validator,
            )
        )
    return tools


def _unmatched_patterns(cfg: ServerConfig, tools: list[_Tool]) -> list[str]:
    from fnmatch import fnmatchcase

    if cfg.allow is None:
        return []
    return [p for p in cfg.allow if not any(fnmatchcase(t.name, p) for t in tools)]


def _schema_problem(tool: _Tool, arguments: dict[str, Any]) -> str | None:
    if tool.validator is None:
        return None
    from jsonschema import exceptions as schema_exceptions

    try:
        error = schema_exceptions.best_match(tool.validator.iter_errors(arguments))
    except Exception as exc:  # noqa: BLE001 - e.g. an unresolvable $ref: don't block the call on it
        log.warning("cannot validate arguments of %s: %s", tool.qualified, exc)
        return None
    if error is None:
        return None
    where = error.json_path
    return error.message if where == "$" else f"{where}: {error.message}"


def _render_content(content: list[dict[str, Any]], structured: Any) -> str:
    parts: list[str] = []
    for item in content:
        kind = item.get("type")
        if kind == "text":
            parts.append(str(item.get("text", "")))
        elif kind in ("image", "audio"):
            parts.append(
                f"[{kind}: {item.get('mimeType', 'unknown type')}, {_b64_size(item.get('data'))} bytes]"
            )
        elif kind == "resource_link":
            label = item.get("title") or item.get("name") or ""
            parts.append(f"[resource link: {label} <{item.get('uri', '')}>]".replace(":  <", ": <"))
        elif kind == "resource":
            res = item.get("resource") or {}
            if "text" in res:
                parts.append(str(res["text"]))
            else:
                mime = res.get("mimeType", "unknown type")
                parts.append(f"[resource {res.get('uri', '')}: {mime}, {_b64_size(res.get('blob'))} bytes]")
        else:
            parts.append(f"[{kind or 'unknown'} content]")
    if not parts and structured is not None:
        return json.dumps(structured, ensure_ascii=False)
    return "\n".join(parts)


def _b64_size(data: Any) -> int:
    if not isinstance(data, str):
        return 0
    stripped = data.rstrip("=")
    return len(stripped) * 3 // 4


def _server_of(qualified: str, connections: dict[str, _Connection]) -> str | None:
    server, sep, _ = qualified.partition(SEPARATOR)
    return server if sep and server in connections else None


def _redact_url(url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc = f"{netloc}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException, conn: _Connection | None = None, *, with_stderr: bool = True) -> str:
    """One line on what went wrong, with the HTTP status or the server's last stderr line."""
    exc = _leaf(exc)
    message = _one_line(exc) if str(exc).strip() else ""
    if isinstance(exc, FileNotFoundError) and conn is not None and conn.config.command:
        text = f"command not found: {conn.config.command}"
    elif not message:
        text = type(exc).__name__
    elif isinstance(exc, OSError | TimeoutError) or type(exc).__module__.startswith(("httpx", "httpcore")):
        text = f"{type(exc).__name__}: {message}"
    else:
        text = message
    if conn is not None and conn.http_error:
        text += f" ({conn.http_error})"
        conn.http_error = None
    tail = conn.stderr_tail(conn.stderr_mark) if conn is not None and with_stderr else ""
    if tail:
        text += f" (server stderr: {tail[:300]})"
    return text
