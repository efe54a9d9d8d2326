"""The MCP tool loop in Anthropic's words: ``mcp_servers`` (the MCP connector's opt-in), the MCP
tools as custom tools for the model, and the calls that ran as ``mcp_tool_use`` /
``mcp_tool_result`` content blocks (shapes of anthropic-python's BetaMCPToolUseBlock and
BetaMCPToolResultBlock). Servers come from ``serve --mcp-config``: an entry names one."""

from __future__ import annotations

from typing import Any

from mlxctl.api.anthropic_translate import content_blocks
from mlxctl.api.chat_split import arguments_object
from mlxctl.errors import BadInputError
from mlxctl.mcp.hub import SEPARATOR


def server_patterns(servers: list[Any], configured: Any) -> list[str] | None:
    """``mcp_servers`` as allowed_tools patterns (None: no entries, every MCP tool)."""
    if not servers:
        return None
    known = ", ".join(sorted(configured)) or "none"
    patterns: list[str] = []
    for i, server in enumerate(servers):
        where = f"mcp_servers.{i}"
        for key in ("url", "authorization_token"):
            if getattr(server, key) is not None:
                raise BadInputError(f"{where}.{key}: MCP servers come from serve --mcp-config; name one of them "
                                    f"and leave {key} out (configured: {known})", param=f"{where}.{key}")
        if server.name not in configured:
            raise BadInputError(f"{where}.name: {server.name!r} is not a configured MCP server (configured: {known})",
                                param=f"{where}.name")
        config = server.tool_configuration
        if config is not None and config.enabled is False:
            continue
        allowed = config.allowed_tools if config is not None else None
        prefix = f"{server.name}{SEPARATOR}"
        patterns += [f"{prefix}*"] if allowed is None else [f"{prefix}{t}" for t in allowed]
    return patterns


def custom_tools(offered: list[dict]) -> list[dict]:
    """The MCP tools (OpenAI shape) as Anthropic custom tools."""
    out = []
    for tool in offered:
        fn = tool["function"]
        entry = {"name": fn["name"], "input_schema": fn.get("parameters") or {"type": "object", "properties": {}}}
        if fn.get("description"):
            entry["description"] = fn["description"]
        out.append(entry)
    return out


def mcp_blocks(call: Any) -> list[dict]:
    """One call that ran (tool_loop.McpCall): its mcp_tool_use and mcp_tool_result blocks."""
    use_id = "mcptoolu_" + call.id.removeprefix("call_")
    return [{"type": "mcp_tool_use", "id": use_id, "name": call.result.tool, "server_name": call.result.server,
             "input": arguments_object(call.arguments)},
            {"type": "mcp_tool_result", "tool_use_id": use_id, "is_error": call.result.is_error,
             "content": [{"type": "text", "text": call.result.text}]}]


def rounds_content(history: list[Any]) -> list[dict]:
    """Every round's blocks in order (thinking, text, the client's tool_use), each followed by its
    MCP calls' blocks; a text block even when empty, if nothing else."""
    blocks: list[dict] = []
    for result in history:
        blocks += [b for b in content_blocks(result.split()) if b["type"] != "text" or b["text"]]
        blocks += [block for call in result.ran for block in mcp_blocks(call)]
    return blocks or [{"type": "text", "text": ""}]
