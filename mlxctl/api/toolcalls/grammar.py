"""llguidance Lark grammars that force tool calls (for ``tool_choice`` "required" or a named tool).

Each grammar admits only calls in its format, at least one, every call of one of the request's
tools (of ``name`` when given) with arguments matching the tool's JSON schema (``%json``, with
the same bounded whitespace as ``response_format`` schemas, so a small model cannot spend its
whole budget on newlines inside a forced call). The
markers are written as text literals: that fits vocabularies where they are ordinary (added,
non-special) tokens, as ``<tool_call>`` is in Qwen's.
"""

from __future__ import annotations

import json

from mlxctl.api.toolcalls.base import parameters_schema, tool_functions
from mlxctl.engine.constraints import JSON_WHITESPACE
from mlxctl.errors import BadInputError


def _functions(tools: list[dict], name: str | None) -> dict[str, dict]:
    functions = tool_functions(tools)
    if name is not None:
        if name not in functions:
            raise BadInputError(
                f"tool_choice names {name!r}, which is not among the tools "
                f"({', '.join(functions) or 'none'})"
            )
        return {name: functions[name]}
    if not functions:
        raise BadInputError("a tool call cannot be required without tools")
    return functions


def call_object_schema(tools: list[dict], name: str | None, args_key: str) -> dict:
    """JSON schema of ``{"name": NAME, ARGS_KEY: {...}}`` for the allowed tools."""
    branches = []
    for fn_name, fn in _functions(tools, name).items():
        arguments = parameters_schema(fn) or {"type": "object"}
        branches.append(
            {
                "type": "object",
                "properties": {"name": {"const": fn_name}, args_key: arguments},
                "required": ["name", args_key],
                "additionalProperties": False,
            }
        )
    schema = branches[0] if len(branches) == 1 else {"anyOf": branches}
    return {**schema, "x-guidance": {"whitespace_flexible": True, "whitespace_pattern": JSON_WHITESPACE}}


def _lark_string(text: str) -> str:
    return json.dumps(text)


def hermes_grammar(tools: list[dict], name: str | None, parallel: bool = False) -> str:
    """A ``<tool_call>\\n{...}\\n</tool_call>`` block; with ``parallel``, one or more,
    separated by newlines."""
    schema = json.dumps(call_object_schema(tools, name, "arguments"), ensure_ascii=False)
    opening, closing = _lark_string("<tool_call>\n"), _lark_string("\n</tool_call>")
    return "\n".join(
        [
            "%llguidance {}",
            'start: call ("\\n" call)*' if parallel else "start: call",
            f"call: {opening} body {closing}",
            f"body: %json {schema}",
        ]
    )


def llama3_json_grammar(tools: list[dict], name: str | None, parallel: bool = False) -> str:
    """A ``{"name": ..., "parameters": {...}}`` object; with ``parallel``, one or more,
    separated by ``; ``."""
    schema = json.dumps(call_object_schema(tools, name, "parameters"), ensure_ascii=False)
    return "\n".join(
        [
            "%llguidance {}",
            'start: call ("; " call)*' if parallel else "start: call",
            f"call: %json {schema}",
        ]
    )
