"""MCP client hub: run tools from configured MCP servers (stdio and streamable HTTP).

``load_config`` reads the common ``{"mcpServers": {...}}`` file (with our ``allow`` and
``timeout`` keys); ``McpHub`` (async) and ``McpHubThread`` (blocking, for the CLI) connect to the
servers, list their allowed tools in OpenAI ``tools`` format as ``<server>__<tool>``, and run
calls with schema checks, per-call timeouts and an audit trail. The ``mcp`` SDK is imported only
when a hub starts, so reading a config works without it.
"""

from mlxctl.mcp.config import (
    DEFAULT_CALL_TIMEOUT,
    McpConfig,
    ServerConfig,
    load_config,
    parse_config,
)
from mlxctl.mcp.hub import DEFAULT_CONNECT_TIMEOUT, SEPARATOR, McpHub, ToolResult
from mlxctl.mcp.sync import McpHubThread

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "SEPARATOR",
    "McpConfig",
    "McpHub",
    "McpHubThread",
    "ServerConfig",
    "ToolResult",
    "load_config",
    "parse_config",
]
