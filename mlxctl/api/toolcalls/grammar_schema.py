"""What a grammar written parameter by parameter can follow of a tool's JSON schema."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from mlxctl.api.toolcalls.base import parameters_schema
from mlxctl.errors import BadInputError

# Pythonic (``f(a=1)``), Qwen3-Coder and GLM (text values typed by the schema) and Gemma (its own
# literals) write each argument on its own, so their grammars are built from the schema: a call
# names an allowed tool, then gives its parameters in the schema's order, each required one once,
# each optional one at most once, no others, each value written so that the format's parser reads
# back a value the parameter's schema accepts. What a grammar cannot follow that way leaves an
# optional parameter out, and makes a tool with such a required parameter impossible to force (the
# 400 says why, when no allowed tool is left). Every narrowing keeps the grammar sound: it never
# admits a call that fails validation (``jsonschema`` without a format checker, so ``format`` is an
# annotation, as in :func:`mlxctl.api.toolcalls.registry.validate_arguments`).

# JSON Schema keywords that constrain a value; any other keyword is an annotation (or unknown)
_VALIDATION = frozenset({
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "maxContains", "minContains",
    "contains", "items", "prefixItems", "additionalItems", "unevaluatedItems", "maxProperties", "minProperties",
    "required", "dependentRequired", "properties", "patternProperties", "additionalProperties",
    "unevaluatedProperties", "propertyNames", "dependentSchemas", "dependencies", "allOf", "anyOf", "oneOf",
    "not", "if", "then", "else", "$ref", "$dynamicRef", "$recursiveRef",
})
# keywords of an arguments object that a grammar written one member at a time cannot follow
_OBJECT_BLOCKERS = frozenset({
    "patternProperties", "propertyNames", "dependentRequired", "dependentSchemas", "dependencies", "allOf",
    "anyOf", "oneOf", "not", "if", "then", "else", "enum", "const", "$ref", "$dynamicRef", "$recursiveRef",
})
_STRING_KEYWORDS = frozenset({"type", "enum", "const", "minLength", "maxLength"})
_NUMBER_KEYWORDS = frozenset({"multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum"})
# keywords that only constrain numbers, objects or arrays: a string passes them
_NOT_FOR_STRINGS = _NUMBER_KEYWORDS | frozenset({
    "maxItems", "minItems", "uniqueItems", "maxContains", "minContains", "contains", "items", "prefixItems",
    "additionalItems", "unevaluatedItems", "maxProperties", "minProperties", "required", "dependentRequired",
    "properties", "patternProperties", "additionalProperties", "unevaluatedProperties", "propertyNames",
    "dependentSchemas", "dependencies",
})


class _Unforceable(Exception):
    """What a grammar cannot enforce about a tool or a parameter (the message says what)."""


def _validation_keys(schema: dict) -> set[str]:
    return {k for k in schema if k in _VALIDATION}


@dataclass(frozen=True)
class _Param:
    key: str
    schema: Any  # a JSON schema: a dict or a boolean
    required: bool


def _object_params(schema: dict) -> list[_Param]:
    """The members an object schema allows, in its order: its properties, then required names it
    does not declare (valued by ``additionalProperties``); a grammar admits no other member."""
    blocked = _validation_keys(schema) & _OBJECT_BLOCKERS
    if blocked:
        raise _Unforceable(f"uses {', '.join(sorted(blocked))} on the object")
    kind = schema.get("type", "object")
    if "object" not in ([kind] if isinstance(kind, str) else kind or []):
        raise _Unforceable("does not allow an object")
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    required = list(dict.fromkeys(k for k in schema.get("required") or [] if isinstance(k, str)))
    params = [_Param(k, s, k in required) for k, s in props.items()]
    extra = schema.get("additionalProperties", True)
    for key in required:
        if key not in props:
            if extra is False or schema.get("unevaluatedProperties", True) is not True:
                raise _Unforceable(f"requires {key!r}, which it does not allow")
            params.append(_Param(key, extra, True))
    least = sum(p.required for p in params)
    if schema.get("minProperties", 0) > least or schema.get("maxProperties", len(params)) < len(params):
        raise _Unforceable("bounds its number of members (minProperties, maxProperties)")
    return params


def _context(fn: dict) -> tuple[list[_Param], dict]:
    """A tool's parameters, and what its schema's subschemas refer to: its definitions and draft."""
    schema = parameters_schema(fn) or {}
    ctx = {k: schema[k] for k in ("$defs", "definitions") if isinstance(schema.get(k), dict)}
    if isinstance(schema.get("$schema"), str):
        ctx["$schema"] = schema["$schema"]
    return _object_params(schema), ctx


def _with_defs(schema: Any, ctx: dict, json_schema: bool = False) -> Any:
    """A subschema made whole again: the root's definitions (and, unless for llguidance, draft)."""
    if schema is True:
        schema = {}
    if not isinstance(schema, dict):
        return schema
    extra = {k: v for k, v in ctx.items() if not (json_schema and k == "$schema")}
    if json_schema and '"$ref"' not in json.dumps(schema):
        return schema  # nothing to refer to
    merged = {**extra, **schema}
    for k in ("$defs", "definitions"):
        if k in ctx and isinstance(schema.get(k), dict):
            merged[k] = {**ctx[k], **schema[k]}
    return merged


def _is_valid(value: Any, schema: Any, ctx: dict) -> bool:
    import jsonschema

    full = _with_defs(schema, ctx)
    if isinstance(full, bool):
        return full
    return jsonschema.validators.validator_for(full)(full).is_valid(value)


def _resolve(schema: Any, ctx: dict) -> Any:
    """A schema that is only a local ``$ref`` (and annotations), resolved; others as they are."""
    seen = 0
    while isinstance(schema, dict) and "$ref" in schema and seen < 32:
        if _validation_keys(schema) != {"$ref"}:
            raise _Unforceable("uses $ref beside other keywords")
        schema = _definition(schema["$ref"], ctx)
        seen += 1
    return schema


def _definition(ref: Any, ctx: dict) -> Any:
    match = re.fullmatch(r"#/(\$defs|definitions)/([^/~]+)", ref) if isinstance(ref, str) else None
    if match is None or match[2] not in ctx.get(match[1], {}):
        raise _Unforceable(f"refers to {ref!r}, which is not a definition of the schema")
    return ctx[match[1]][match[2]]


def _members(params: list[_Param], member) -> list[tuple[str, bool]]:
    """``member(param)`` (an expression) for each parameter, leaving out optional ones it cannot
    write; a required one it cannot write makes the tool unforceable."""
    out = []
    for param in params:
        try:
            out.append((member(param), param.required))
        except _Unforceable as exc:
            if param.required:
                raise _Unforceable(f"parameter {param.key!r} {exc}") from None
    return out


def _tool_branches(functions: dict[str, dict], fmt: str, call) -> list[str]:
    """``call(name, fn)`` (an expression) for each allowed tool that can be forced in ``fmt``; a
    400 naming why when none can."""
    branches, reasons = [], []
    for fn_name, fn in functions.items():
        try:
            branches.append(call(fn_name, fn))
        except _Unforceable as exc:
            reasons.append(f"{fn_name!r}: {exc}")
    if not branches:
        raise BadInputError(
            f"a forced tool call cannot be enforced in the {fmt} tool-call format ({'; '.join(reasons)})",
            hint="use tool_choice=auto, or simplify the tool's parameters schema",
        )
    return branches
