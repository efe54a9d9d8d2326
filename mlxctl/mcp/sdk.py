"""The adapter onto the ``mcp`` SDK: importing it, our client identity, wire dicts, transports."""

from __future__ import annotations

import contextlib
import tempfile
from typing import IO, Any

from mlxctl.errors import UnavailableError
from mlxctl.mcp.connection import Connection, one_line


def import_sdk() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        if exc.name == "mcp":
            raise UnavailableError(
                "MCP tools need the 'mcp' Python package, which is not installed",
                hint="pip install 'mcp>=2.3,<3'",
            ) from None
        raise UnavailableError(
            f"the installed 'mcp' package cannot be imported: {one_line(exc)}",
            hint="reinstall it: pip install --upgrade 'mcp>=2.3,<3'",
        ) from None


def client_info() -> Any:
    from mcp.types import Implementation

    from mlxctl import __version__

    return Implementation(name="mlxctl", version=__version__)


def dump(model: Any) -> dict[str, Any]:
    """An SDK model as its wire-format dict (camelCase keys in every SDK version)."""
    if isinstance(model, dict):
        return model
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def open_transport(
    conn: Connection, stack: contextlib.AsyncExitStack, server_stderr: IO[Any] | None
) -> tuple[Any, Any]:
    """The read and write streams to the server: a spawned command (stdio) or streamable HTTP."""
    if conn.config.command is not None:
        streams = await _open_stdio(conn, stack, server_stderr)
    else:
        streams = await _open_http(conn, stack)
    return streams[0], streams[1]


async def _open_stdio(
    conn: Connection, stack: contextlib.AsyncExitStack, server_stderr: IO[Any] | None
) -> Any:
    from mcp.client.stdio import (
        StdioServerParameters,
        get_default_environment,
        stdio_client,
    )

    cfg = conn.config
    errlog = server_stderr
    if errlog is None:
        conn.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the server
        errlog = conn.stderr
    params = StdioServerParameters(
        command=cfg.command,
        args=list(cfg.args),
        env={**get_default_environment(), **cfg.env},
        cwd=cfg.cwd,
    )
    return await stack.enter_async_context(stdio_client(params, errlog=errlog))


async def _open_http(conn: Connection, stack: contextlib.AsyncExitStack) -> Any:
    from mcp.client import streamable_http

    cfg = conn.config
    if not hasattr(streamable_http, "streamable_http_client"):  # the SDK's older spelling (mcp 1.x)
        return await stack.enter_async_context(
            streamable_http.streamablehttp_client(cfg.url, headers=cfg.headers or None)
        )
    from mcp.shared._httpx_utils import create_mcp_http_client

    client = create_mcp_http_client(headers=cfg.headers or None)
    client.event_hooks["response"].append(conn.note_http_response)
    client = await stack.enter_async_context(client)
    return await stack.enter_async_context(
        streamable_http.streamable_http_client(cfg.url, http_client=client)
    )
