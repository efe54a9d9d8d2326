"""One server's state as reported by ``/v1/mcp/tools`` and ``mlxctl`` status output."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from mlxctl.mcp.connection import Connection


def server_status(conn: Connection) -> dict[str, Any]:
    cfg = conn.config
    entry: dict[str, Any] = {
        "name": cfg.name,
        "transport": cfg.transport,
        "state": conn.state,
        "error": conn.error,
        "call_timeout_s": cfg.timeout,
        "server_info": conn.server_info,
        "tools": [
            {
                "name": t.qualified,
                "tool": t.name,
                "allowed": t.allowed,
                "description": t.description,
            }
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
    return entry


def _redact_url(url: str) -> str:
    """The URL without credentials, query or fragment."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc = f"{netloc}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
