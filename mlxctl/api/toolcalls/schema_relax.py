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

Every forced call's objects are also *closed*: an object schema that declares ``properties`` and
says nothing of other members (no ``additionalProperties``, ``patternProperties`` or
``unevaluatedProperties``) admits only the declared ones, as the formats written parameter by
parameter already do and as xgrammar's strict mode (vLLM's default) does. JSON Schema's default
admits any member, and a sampled small model spent its budget on invented ones (``"maxLength":
16, "description": "..."``) until the call was cut at ``max_tokens``. A schema that admits other
members explicitly keeps them, and a tool schema that composes objects (``allOf`` of several, or
``$ref`` beside ``properties``), where a member declared in one part is allowed by the whole, is
left as it is. And an integer without a ``minimum`` or a ``maximum`` is bounded on that side by
+-(2**53 - 1), I-JSON's interoperable range (RFC 7493): what every JSON reader keeps exactly, and
enough for any count or id a tool takes. JSON Schema's integer has no bound, and a sampled model
wrote a hundred-digit ``n`` until ``max_tokens`` cut the call.
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
    if error is not None:
        if strict:
            raise BadInputError(_refusal(fn["name"], keys, error, "the tool is strict, so nothing is relaxed"),
                                hint="drop strict, or simplify the tool's parameters schema")
        schema, dropped = _relaxed(schema, fn["name"], error, keys)
        log.info("tool %r: %s not enforced by the forcing grammar (the tool is not strict)",
                 fn["name"], ", ".join(sorted(dropped)))
    schema = narrowed(schema)
    if schema is parameters_schema(fn):
        return tool
    out = {**fn, "parameters": schema}
    return {**tool, "function": out} if fn is not tool else out


_OPEN_KEYS = ("additionalProperties", "patternProperties", "unevaluatedProperties")
SAFE_INTEGER = 2**53 - 1  # I-JSON's (RFC 7493) interoperable integers: what every JSON reader keeps exactly
# what, beside ``properties``, can allow a member the object itself does not declare
_BESIDE = ("$ref", "allOf", "anyOf", "oneOf")
_CONDITIONAL = ("if", "then", "else", "dependentSchemas", "dependencies")


def narrowed(schema: Any) -> Any:
    """``schema`` with every object schema that declares ``properties`` and nothing about other
    members closed (``additionalProperties: false``), unless the schema composes objects, and
    every integer without a bound on a side bounded there by I-JSON's interoperable range (see
    the module's docstring); ``schema`` itself when nothing changes."""
    return _narrow(schema, not _composes_objects(schema))


def _composes_objects(schema: Any) -> bool:
    if isinstance(schema, list):
        return any(_composes_objects(s) for s in schema)
    if not isinstance(schema, dict):
        return False
    parts = schema.get("allOf")
    if isinstance(parts, list) and len(parts) > 1 or any(k in schema for k in _CONDITIONAL):
        return True
    if "properties" in schema and any(k in schema for k in _BESIDE):
        return True
    return any(_composes_objects(v) for v in _subschemas(schema))


def _subschemas(schema: dict) -> list:
    out = []
    for key, value in schema.items():
        if key in _MAP and isinstance(value, dict):
            out.extend(value.values())
        elif key in _LIST and isinstance(value, list):
            out.extend(value)
        elif key in _ONE:
            out.append(value)
    return out


def _narrow(schema: Any, close: bool) -> Any:
    if not isinstance(schema, dict):
        return schema
    out, changed = {}, False
    for key, value in schema.items():
        if key in _MAP and isinstance(value, dict):
            new = {k: _narrow(v, close) for k, v in value.items()}
            changed |= any(new[k] is not value[k] for k in value)
        elif key in _LIST and isinstance(value, list):
            new = [_narrow(v, close) for v in value]
            changed |= any(a is not b for a, b in zip(new, value))
        elif key in _ONE and key != "not":  # narrowing inside a negation would widen it
            new = _narrow(value, close)
            changed |= new is not value
        else:
            new = value
        out[key] = new
    if close and isinstance(schema.get("properties"), dict) and not any(k in schema for k in _OPEN_KEYS):
        out["additionalProperties"], changed = False, True
    bounds = _integer_bounds(schema)
    return {**out, **bounds} if bounds else out if changed else schema


def _integer_bounds(schema: dict) -> dict:
    """The bounds an integer schema lacks, within +-(2**53 - 1): none where it has an ``enum`` or
    a ``const``, or where its bound on the other side is already outside that range."""
    kind = schema.get("type")
    if not (kind == "integer" or isinstance(kind, list) and "integer" in kind) or "enum" in schema or "const" in schema:
        return {}
    low = next((schema[k] for k in ("minimum", "exclusiveMinimum") if _is_number(schema.get(k))), None)
    high = next((schema[k] for k in ("maximum", "exclusiveMaximum") if _is_number(schema.get(k))), None)
    out = {}
    if low is None and (high is None or high >= -SAFE_INTEGER):
        out["minimum"] = -SAFE_INTEGER
    if high is None and (low is None or low <= SAFE_INTEGER):
        out["maximum"] = SAFE_INTEGER
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


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
