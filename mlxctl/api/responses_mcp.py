"""The MCP tool loop in the Responses API's words: ``{"type": "mcp"}`` tools (the hosted-MCP
shape; ``server_label`` names a server of ``serve --mcp-config``), the MCP tools as function
tools for the model, and ``mcp_list_tools`` / ``mcp_call`` output items (shapes of
openai-python's McpListTools and McpCall)."""

from __future__ import annotations

from typing import Any

from mlxctl.api.responses_objects import new_id
from mlxctl.errors import BadInputError
from mlxctl.mcp.hub import SEPARATOR

MCP_KEYS = frozenset({"type", "server_label", "allowed_tools", "require_approval"})


def is_mcp_tool(tool: Any) -> bool:
    return isinstance(tool, dict) and tool.get("type") == "mcp"


def mcp_entries(tools: list[Any] | None, configured: Any) -> tuple[list[Any], list[str], list[str]]:
    """The client's own tools, the allowed_tools patterns of the mcp entries and their server labels."""
    known = ", ".join(sorted(configured)) or "none"
    client: list[Any] = []
    patterns: list[str] = []
    labels: list[str] = []
    for i, tool in enumerate(tools or ()):
        if not is_mcp_tool(tool):
            client.append(tool)
            continue
        where = f"tools.{i}"
        if "server_url" in tool or "connector_id" in tool:
            key = "server_url" if "server_url" in tool else "connector_id"
            raise BadInputError(f"{where}.{key}: MCP servers come from serve --mcp-config; give server_label, "
                                f"the name of one of them (configured: {known})", param=f"{where}.{key}")
        unknown = sorted(set(tool) - MCP_KEYS)
        if unknown:
            raise BadInputError(f"{where}.{unknown[0]}: not supported (an mcp tool takes server_label, allowed_tools "
                                f"and require_approval \"never\")", param=f"{where}.{unknown[0]}")
        label = tool.get("server_label")
        if label not in configured:
            raise BadInputError(f"{where}.server_label: {label!r} is not a configured MCP server (configured: {known})",
                                param=f"{where}.server_label")
        if tool.get("require_approval") not in (None, "never"):
            raise BadInputError(f"{where}.require_approval: the server runs MCP calls without approvals; give "
                                f"\"never\" or leave it out", param=f"{where}.require_approval")
        names = _allowed_names(tool.get("allowed_tools"), f"{where}.allowed_tools")
        labels.append(label)
        patterns += [f"{label}{SEPARATOR}*"] if names is None else [f"{label}{SEPARATOR}{n}" for n in names]
    return client, patterns, labels


def _allowed_names(allowed: Any, where: str) -> list[str] | None:
    if isinstance(allowed, dict):
        if allowed.get("read_only"):
            raise BadInputError(f"{where}.read_only: not supported (name the tools in tool_names)",
                                param=f"{where}.read_only")
        allowed = allowed.get("tool_names")
    if allowed is None:
        return None
    if not isinstance(allowed, list) or not all(isinstance(n, str) and n for n in allowed):
        raise BadInputError(f"{where} must be a list of tool names", param=where)
    return allowed


def function_tools(offered: list[dict]) -> list[dict]:
    """The MCP tools (OpenAI chat shape) as Responses function tools."""
    keys = ("name", "description", "parameters")
    return [{"type": "function", **{k: v for k, v in t["function"].items() if k in keys}} for t in offered]


def list_tools_items(labels: list[str], offered: list[dict]) -> list[dict]:
    """One mcp_list_tools item per server label: the tools offered from it, by their own names."""
    items = []
    for label in dict.fromkeys(labels):
        prefix = f"{label}{SEPARATOR}"
        tools = [{"name": t["function"]["name"].removeprefix(prefix), "description": t["function"].get("description"),
                  "input_schema": t["function"].get("parameters") or {}, "annotations": None}
                 for t in offered if t["function"]["name"].startswith(prefix)]
        items.append({"id": new_id("mcpl"), "type": "mcp_list_tools", "server_label": label, "tools": tools,
                      "error": None})
    return items


def mcp_call_item(call: Any) -> dict:
    """One call that ran (tool_loop.McpCall); a tool error is status "failed" with its text."""
    result = call.result
    error = {"type": "mcp_tool_execution_error", "content": [{"type": "text", "text": result.text}]} \
        if result.is_error else None
    return {"id": new_id("mcp"), "type": "mcp_call", "server_label": result.server, "name": result.tool,
            "arguments": call.arguments, "output": result.text, "error": error,
            "status": "failed" if result.is_error else "completed", "approval_request_id": None}


def rounds_output(draft: Any, history: list[Any], status: str) -> list[dict]:
    """Every round's output items in order (reasoning, message, the client's function calls), each
    followed by its mcp_call items; each round's message has its own id."""
    from mlxctl.api.responses_objects import output_items

    items: list[dict] = []
    for n, result in enumerate(history):
        if n:
            draft.item_id = new_id("msg")
        mine = output_items(draft, result.split(), status if n == len(history) - 1 else "completed")
        items += [i for i in mine if i["type"] != "message" or i["content"][0]["text"]]
        items += [mcp_call_item(call) for call in result.ran]
    return items or [draft.message_item("", status)]
