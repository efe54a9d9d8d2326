"""A server's tools as a model sees them: listed, named ``<server>__<tool>``, allow-listed, checked."""

from __future__ import annotations

import logging
import re
from collections.abc import Container
from dataclasses import dataclass
from typing import Any

from mlxctl.mcp.config import ServerConfig
from mlxctl.mcp.sdk import dump

log = logging.getLogger("mlxctl.mcp")

SEPARATOR = "__"
_MAX_LISTING_PAGES = 100
_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")


@dataclass
class Tool:
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


async def list_tools(session: Any) -> list[dict[str, Any]]:
    """Every tool the server lists, page by page (up to a bound)."""
    import inspect

    takes_params = "params" in inspect.signature(session.list_tools).parameters
    tools: list[dict[str, Any]] = []
    cursor = None
    for _ in range(_MAX_LISTING_PAGES):
        data = dump(await _list_page(session, cursor, takes_params))
        tools.extend(data.get("tools") or [])
        cursor = data.get("nextCursor")
        if not cursor:
            break
    return tools


async def _list_page(session: Any, cursor: str | None, takes_params: bool) -> Any:
    from mcp.types import PaginatedRequestParams

    if cursor is None:
        return await session.list_tools()
    if takes_params:
        return await session.list_tools(params=PaginatedRequestParams(cursor=cursor))
    return await session.list_tools(cursor)


def make_tools(cfg: ServerConfig, listed: list[dict[str, Any]]) -> list[Tool]:
    """The listed tools under their qualified names; a name that clashes once made safe is skipped."""
    tools: list[Tool] = []
    seen: set[str] = set()
    for item in listed:
        name = item.get("name")
        if not isinstance(name, str) or not name:
            continue
        qualified = f"{cfg.name}{SEPARATOR}{_UNSAFE_NAME_CHARS.sub('_', name)}"
        if qualified in seen:
            log.warning(
                "MCP server %r: tool %r clashes with another as %r; skipped",
                cfg.name,
                name,
                qualified,
            )
            continue
        seen.add(qualified)
        tools.append(_make_tool(cfg, item, name, qualified))
    return tools


def _make_tool(cfg: ServerConfig, item: dict[str, Any], name: str, qualified: str) -> Tool:
    schema = item.get("inputSchema")
    if not isinstance(schema, dict):
        schema = {"type": "object", "properties": {}}
    validator = _validator(cfg, name, schema)
    description = item.get("description") or item.get("title") or f"{name} (from MCP server {cfg.name})"
    return Tool(
        qualified=qualified,
        server=cfg.name,
        name=name,
        description=description,
        schema=schema,
        allowed=cfg.allows(name),
        validator=validator,
    )


def _validator(cfg: ServerConfig, name: str, schema: dict[str, Any]) -> Any:
    from jsonschema import exceptions as schema_exceptions
    from jsonschema import validators

    try:
        cls = validators.validator_for(schema, default=validators.Draft202012Validator)
        cls.check_schema(schema)
        return cls(schema)
    except schema_exceptions.SchemaError as exc:
        log.warning(
            "MCP server %r: tool %r has an invalid input schema (%s); arguments go unchecked",
            cfg.name,
            name,
            exc.message,
        )
        return None


def unmatched_patterns(cfg: ServerConfig, tools: list[Tool]) -> list[str]:
    from fnmatch import fnmatchcase

    if cfg.allow is None:
        return []
    return [p for p in cfg.allow if not any(fnmatchcase(t.name, p) for t in tools)]


def schema_problem(tool: Tool, arguments: dict[str, Any]) -> str | None:
    """What is wrong with ``arguments`` under the tool's input schema; None if nothing (or unknown)."""
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


def server_of(qualified: str, servers: Container[str]) -> str | None:
    """The server a qualified tool name names, if it is a configured one."""
    server, sep, _ = qualified.partition(SEPARATOR)
    return server if sep and server in servers else None
