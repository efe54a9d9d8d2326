"""Tool schemas made enforceable before a forcing grammar is built from them.

A forced call (``tool_choice`` "required", a named tool, Anthropic's "any"/"tool") compiles each
allowed tool's parameters schema into the grammar. llguidance implements most of JSON Schema but
not all of it (``propertyNames``, ``if``/``then``/``else``, ``dependentSchemas``,
``dependentRequired``, ``unevaluatedProperties``, ``contains``/``minContains``, ``not``,
``uniqueItems``, ...). For a tool that is not strict, those keywords are *relaxed*: dropped from
the schema the grammar is built from (wherever they appear), so the arguments are still shaped by
the rest of the schema; the call is then checked against the whole schema as any call is
(:mod:`mlxctl.api.toolcalls.base`). A strict tool (``strict: true``) is never relaxed: a keyword
the grammar cannot enforce is a 400 naming the tool and the keyword, as is a non-strict tool's
schema that llguidance refuses even leniently (an unsupported regex ``pattern``, ...).
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from mlxctl.api.toolcalls.base import is_strict, parameters_schema
from mlxctl.errors import BadInputError

log = logging.getLogger("mlxctl.server")

# where JSON Schema keeps subschemas: one schema, a list of them, or a map of them
_ONE = ("items", "additionalItems", "unevaluatedItems", "additionalProperties", "unevaluatedProperties",
        "propertyNames", "contains", "not", "if", "then", "else")
_LIST = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
_MAX_ROUNDS = 16  # nesting levels of unimplemented keywords relaxed
_UNIMPLEMENTED = re.compile(r"Unimplemented keys: \[([^\]]*)\]")


def enforceable_tools(tools: list[dict], name: str | None) -> list[dict]:
    """``tools`` with the parameters of each tool a forced call may use (``name`` only, when
    given) checked against llguidance, and relaxed where the tool is not strict."""
    return [_enforceable(t) if name is None or _fn(t).get("name") == name else t for t in tools]


def _fn(tool: dict) -> dict:
    return tool.get("function") if isinstance(tool.get("function"), dict) else tool


def _enforceable(tool: dict) -> dict:
    fn = _fn(tool)
    schema = parameters_schema(fn)
    if not isinstance(schema, dict):
        return tool
    strict = is_strict(fn)
    error, keys = _check(schema)
    if error is None:
        return tool
    if strict:
        raise BadInputError(_refusal(fn["name"], keys, error, "the tool is strict, so nothing is relaxed"),
                            hint="drop strict, or simplify the tool's parameters schema")
    relaxed, dropped = _relaxed(schema, fn["name"], error, keys)
    log.info("tool %r: %s not enforced by the forcing grammar (the tool is not strict)",
             fn["name"], ", ".join(sorted(dropped)))
    out = {**fn, "parameters": relaxed}
    return {**tool, "function": out} if fn is not tool else out


def _relaxed(schema: dict, name: str, error: str | None, keys: list[str]) -> tuple[dict, set[str]]:
    """``schema`` without the keywords llguidance does not implement, and those keywords. It
    names only those of the outermost schema that has some, so this drops them round by round."""
    dropped: set[str] = set()
    for _ in range(_MAX_ROUNDS):
        if error is None:
            return schema, dropped
        if not keys or dropped.issuperset(keys):
            break
        dropped.update(keys)
        schema = _without(schema, frozenset(dropped))
        error, keys = _check(schema)
    raise BadInputError(_refusal(name, keys, error or "", "not even with them relaxed"),
                        hint="use tool_choice=auto, or simplify the tool's parameters schema")


def _refusal(name: str, keys: list[str], error: str, why: str) -> str:
    if keys:
        return (f"tool {name!r}: its parameters schema uses {', '.join(keys)}, which a forced call's "
                f"grammar cannot enforce ({why})")
    return f"tool {name!r}: its parameters schema cannot be enforced by a forced call's grammar: {error}"


def _check(schema: dict) -> tuple[str | None, list[str]]:
    """(llguidance's error or None, the keywords it does not implement) for ``schema``, compiled
    strictly."""
    from llguidance import LLMatcher

    from mlxctl.engine.constraints import _one_line

    try:
        grammar = LLMatcher.grammar_from_json_schema(json.dumps(schema), overrides={"lenient": False})
    except ValueError as exc:
        return _one_line(str(exc)), []
    failed, messages = LLMatcher.validate_grammar_with_warnings(grammar)
    keys = sorted({k.strip().strip('"') for m in messages for match in _UNIMPLEMENTED.finditer(m)
                   for k in match[1].split(",") if k.strip()})
    return (_one_line("; ".join(messages)) if failed else None), keys


def _without(schema: Any, keys: frozenset[str]) -> Any:
    """``schema`` with ``keys`` removed from it and from every subschema."""
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key in keys:
            continue
        if key in _MAP and isinstance(value, dict):
            value = {k: _without(v, keys) for k, v in value.items()}
        elif key in _LIST and isinstance(value, list):
            value = [_without(v, keys) for v in value]
        elif key in _ONE:
            value = _without(value, keys)
        out[key] = value
    return out
