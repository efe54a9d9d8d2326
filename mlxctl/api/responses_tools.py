"""Responses API tools beyond plain functions: namespaces, and the hosted tools mlxctl cannot run.

Codex CLI sends, on every request, ``namespace`` tools (``{"type": "namespace", "name": "crm",
"description": ..., "tools": [{"type": "function", "name": "create_issue", ...}]}``) and hosted
tools (``web_search``, ...). A namespace's functions are offered to the model under one flat name
each (:func:`joined_name`: ``crm.create_issue``; a namespace that already ends in ``_`` or ``.``,
as Codex's ``mcp__server__``, is joined as is: ``mcp__server__create_issue``). A call of one comes
back as OpenAI's does: a ``function_call`` item with ``name`` the function's own name and
``namespace`` the namespace's, which Codex routes on; a namespaced ``function_call`` sent back as
input is shown to the model under the flat name again.

Hosted tools run on OpenAI's side; mlxctl cannot run them. They are accepted, not offered to the
model, never pretended (no ``web_search_call`` items), logged once per request at INFO, echoed in
the response's ``tools`` and listed in its ``tools_not_offered``. Forcing one (``tool_choice:
{"type": "web_search"}``) is a 400 naming it. ``custom`` (freeform) tools are a 400: their calls are
``custom_tool_call`` items, which mlxctl does not produce. See docs/serve.md.
"""

from __future__ import annotations

import logging
from typing import Any

from mlxctl.errors import BadInputError

log = logging.getLogger("mlxctl.server")

HOSTED_TOOLS = ("web_search", "web_search_preview", "file_search", "code_interpreter", "image_generation",
                "local_shell", "computer_use_preview", "computer_use", "mcp", "tool_search", "shell",
                "apply_patch")
_FUNCTION_KEYS = ("name", "description", "parameters", "strict")


def is_hosted(kind: Any) -> bool:
    """A hosted tool type, dated variants included (``web_search_preview_2025_03_11``)."""
    return isinstance(kind, str) and any(kind == h or kind.startswith(f"{h}_2") for h in HOSTED_TOOLS)


def joined_name(namespace: str | None, name: str) -> str:
    """The flat name the model sees for ``name`` in ``namespace`` (``name`` without one)."""
    if not namespace:
        return name
    return f"{namespace}{name}" if namespace.endswith(("_", ".")) else f"{namespace}.{name}"


def namespace_functions(tool: dict, where: str) -> list[tuple[dict, str, str]]:
    """(function, where it is, its flat name) for each function of a namespace tool."""
    ns, members = tool.get("name"), tool.get("tools")
    if not isinstance(ns, str) or not ns:
        raise BadInputError(f"{where}.name must be a non-empty string (the namespace's name)")
    if not isinstance(members, list):
        raise BadInputError(f"{where}.tools must be a list of function tools")
    out = []
    for j, member in enumerate(members):
        at = f"{where}.tools[{j}]"
        kind = member.get("type") if isinstance(member, dict) else type(member).__name__
        if kind == "custom":
            raise custom_refusal(at, member)
        if kind != "function":
            raise BadInputError(f"{at}: a namespace holds function tools, got {kind!r}")
        fn = {k: member[k] for k in _FUNCTION_KEYS if k in member}
        if tool.get("description"):
            fn["description"] = "\n\n".join(d for d in (tool["description"], fn.get("description")) if d)
        out.append((fn, at, joined_name(ns, str(member.get("name")))))
    return out


def custom_refusal(where: str, tool: dict) -> BadInputError:
    return BadInputError(f"{where}: custom (freeform) tools are not supported (their calls are custom_tool_call "
                         f"items, which mlxctl does not produce); define {tool.get('name')!r} as a function tool")


def namespaced(tools: list[Any] | None) -> dict[str, tuple[str, str]]:
    """Flat name -> (namespace, function name) for every namespaced function of ``tools``."""
    out = {}
    for tool in tools or ():
        if isinstance(tool, dict) and tool.get("type") == "namespace" and isinstance(tool.get("tools"), list):
            for member in tool["tools"]:
                if isinstance(member, dict) and isinstance(member.get("name"), str):
                    out[joined_name(tool["name"], member["name"])] = (tool["name"], member["name"])
    return out


def not_offered(tools: list[Any] | None) -> list[str]:
    """The types of the hosted tools in ``tools``, in order, each once."""
    kinds = [t["type"] for t in tools or () if isinstance(t, dict) and is_hosted(t.get("type"))]
    return list(dict.fromkeys(kinds))


def log_not_offered(tools: list[Any] | None) -> None:
    kinds = not_offered(tools)
    if kinds:
        log.info("responses: hosted tools not offered to the model (mlxctl cannot run them): %s", ", ".join(kinds))


def check_choice(choice: Any) -> None:
    """A 400 for a tool_choice that forces a hosted tool or a custom one."""
    kind = choice.get("type") if isinstance(choice, dict) else None
    if is_hosted(kind):
        raise BadInputError(f"tool_choice forces the hosted tool {kind!r}, which mlxctl cannot run "
                            "(it is accepted in tools but not offered to the model)")
    if kind == "custom":
        raise BadInputError("tool_choice forces a custom tool; custom (freeform) tools are not supported")
