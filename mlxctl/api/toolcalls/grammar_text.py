"""Values of the text-valued formats (Qwen3-Coder and GLM): a parameter's text up to the end tag."""

from __future__ import annotations

import json
import re
from typing import Any

from mlxctl.api.toolcalls.grammar_core import (
    _alternatives,
    _json_expr,
    _Lark,
    _lark_string,
    _string_lexeme,
)
from mlxctl.api.toolcalls.grammar_schema import (
    _NOT_FOR_STRINGS,
    _STRING_KEYWORDS,
    _is_valid,
    _resolve,
    _Unforceable,
    _validation_keys,
)
from mlxctl.api.toolcalls.values import schema_types

# A value is the text up to the format's first end tag, converted by the parameter's schema
# (:func:`mlxctl.api.toolcalls.values.convert_value`): a string parameter's text is the string
# as written, any other's is JSON. Strings that mix with other types are not written (but for
# string-or-null), and JSON written inside a value must not close it: its strings (and keys)
# never hold ``</`` (nor, for Qwen3-Coder, ``<p``), which the schema handed to llguidance adds.

_SAFE_ANY = "mlxctl_safe_any"


def _guarded(schema: Any, ctx: dict, pattern: str) -> Any:
    """``schema`` (with the root's definitions) for JSON written inside a text value: every
    string in the value, member names included, matches ``pattern``; an object that declares
    properties has no other members."""
    guard = _Guard(pattern)
    out = guard.walk(schema)
    if not isinstance(out, dict):
        return out
    out = dict(out)
    for k in ("$defs", "definitions"):
        if k in ctx and '"$ref"' in json.dumps(schema):
            out[k] = {**{n: guard.or_nothing(d) for n, d in ctx[k].items()}, **out.get(k, {})}
    if guard.used:
        out["$defs"] = {**out.get("$defs", {}), _SAFE_ANY: guard.anything()}
    return out


class _Guard:
    """Rewrites schemas so that every string a value holds, member names included, matches
    ``pattern`` (copies; _Unforceable where a schema cannot be narrowed so)."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.ref = {"$ref": f"#/$defs/{_SAFE_ANY}"}  # any value, guarded: see anything()
        self.used = False  # whether ``ref`` was written

    def anything(self) -> dict:
        """The schema ``ref`` refers to: any JSON value whose strings match the pattern."""
        return {"anyOf": [
            {"type": ["null", "boolean", "number"]},
            {"type": "string", "pattern": self.pattern},
            {"type": "array", "items": self.ref},
            {"type": "object", "additionalProperties": False, "patternProperties": {self.pattern: self.ref}},
        ]}

    def safe(self, value: Any) -> bool:
        """Whether every string in a JSON value (member names included) matches the pattern."""
        if isinstance(value, str):
            return re.fullmatch(self.pattern.strip("^$"), value) is not None
        if isinstance(value, list):
            return all(map(self.safe, value))
        if isinstance(value, dict):
            return all(self.safe(k) and self.safe(v) for k, v in value.items())
        return True

    def walk(self, s: Any) -> Any:
        """A schema guarded: its subschemas, its enum and const, then what its types allow."""
        if s is True:
            self.used = True
            return self.ref
        if not isinstance(s, dict):
            return s
        s = dict(s)
        self.walk_subschemas(s)
        self.narrow_values(s)
        if "$ref" in s:
            return s  # its definition is guarded
        kind = s.get("type")
        if kind is None:
            if _validation_keys(s) & {"anyOf", "oneOf", "allOf", "enum", "const"}:
                return s  # its branches or values are guarded
            if not _validation_keys(s):
                return self.walk(True)
            kind = s["type"] = ["null", "boolean", "number", "string", "array", "object"]  # spelled out
        self.narrow_types(s, [kind] if isinstance(kind, str) else kind)
        return s

    def or_nothing(self, schema: Any) -> Any:
        """``walk(schema)``, or a schema nothing matches when it cannot be written (a definition
        the value may not even use)."""
        try:
            return self.walk(schema)
        except _Unforceable:
            return False

    def walk_subschemas(self, s: dict) -> None:
        for k in ("anyOf", "oneOf", "allOf", "prefixItems"):
            if isinstance(s.get(k), list):
                s[k] = [self.walk(b) for b in s[k]]
        for k in ("properties", "$defs", "definitions"):
            if isinstance(s.get(k), dict):
                s[k] = {n: self.walk(b) for n, b in s[k].items()}
        if "contains" in s:  # (``not`` and ``if`` are left alone: narrowing them would widen)
            s["contains"] = self.walk(s["contains"])

    def narrow_values(self, s: dict) -> None:
        if "patternProperties" in s or "propertyNames" in s:
            raise _Unforceable("uses patternProperties or propertyNames")
        if isinstance(s.get("enum"), list):
            s["enum"] = [v for v in s["enum"] if self.safe(v)]
            if not s["enum"]:
                raise _Unforceable("has no enum value that can be written")
        if "const" in s and not self.safe(s["const"]):
            raise _Unforceable("has a const value that cannot be written")

    def narrow_types(self, s: dict, kinds: list[str]) -> None:
        if "string" in kinds:
            if "pattern" in s:
                s["allOf"] = [*s.get("allOf", []), {"pattern": self.pattern}]
            else:
                s["pattern"] = self.pattern
        if "object" in kinds:
            self.narrow_object(s)
        if "array" in kinds:
            items = s.get("items", True)
            if isinstance(items, list):
                raise _Unforceable("uses a list of items")
            s["items"] = self.walk(items)

    def narrow_object(self, s: dict) -> None:
        # members beyond the declared ones only where none are declared: llguidance would
        # have to intersect a declared member's schema with the pattern's (and cannot, when
        # either is recursive)
        extra = s.get("additionalProperties", True)
        if extra is not False:
            if s.get("properties"):
                if not set(s.get("required") or []) <= set(s["properties"]):
                    raise _Unforceable("requires members it does not declare")
                s["additionalProperties"] = False
            else:
                s["additionalProperties"], s["patternProperties"] = False, {self.pattern: self.walk(extra)}


def _string_schema(schema: Any, ctx: dict) -> tuple[dict, list[str] | None]:
    """A plain string schema (``type``, ``enum``, ``const``, lengths, annotations and keywords
    that do not apply to strings), as (itself resolved, its allowed strings or None for any);
    _Unforceable for any other."""
    schema = _resolve({} if schema is True else schema, ctx)
    if not isinstance(schema, dict):
        raise _Unforceable("accepts no value")
    other = _validation_keys(schema) - _STRING_KEYWORDS - _NOT_FOR_STRINGS
    if other:
        raise _Unforceable(f"uses {', '.join(sorted(other))} on a string")
    if schema.get("type", "string") not in ("string", ["string"]):
        raise _Unforceable("is not a plain string")
    choices = None
    if "enum" in schema or "const" in schema:
        values = list(schema.get("enum", [schema.get("const")]))
        if "const" in schema:
            values = [v for v in values if v == schema["const"]]
        if not all(isinstance(v, str) for v in values):
            raise _Unforceable("mixes strings with other types in its enum")
        choices = [v for v in dict.fromkeys(values) if _is_valid(v, schema, ctx)]
    return schema, choices


def _nullable_string(schema: dict, ctx: dict) -> tuple[dict, list[str] | None, bool]:
    """A string-or-null schema as (its string schema, allowed strings or None, null allowed)."""
    keys = _validation_keys(schema)
    branches = schema.get("anyOf", schema.get("oneOf"))
    if keys in ({"anyOf"}, {"oneOf"}) and isinstance(branches, list) and len(branches) == 2:
        nulls = [b for b in branches if isinstance(b, dict) and _validation_keys(b) == {"type"} and b["type"] == "null"]
        if len(nulls) == 1:
            string, choices = _string_schema(branches[1 - branches.index(nulls[0])], ctx)
            return string, choices, True
    kind = schema.get("type")
    if keys - _STRING_KEYWORDS - _NOT_FOR_STRINGS or not isinstance(kind, list) or sorted(kind) != ["null", "string"]:
        raise _Unforceable("mixes strings with other types")
    values = schema.get("enum", [schema["const"]] if "const" in schema else None)
    plain = {k: v for k, v in schema.items() if k not in ("enum", "const")} | {"type": "string"}
    if values is None:
        return _string_schema(plain, ctx) + (True,)
    strings = [v for v in values if isinstance(v, str)]
    if len(strings) + values.count(None) != len(values):
        raise _Unforceable("mixes strings with other types in its enum")
    return plain, [v for v in dict.fromkeys(strings) if _is_valid(v, plain, ctx)], None in values


def _text_value(g: _Lark, schema: Any, ctx: dict, stops: tuple[str, ...], close: str, pattern: str,
                inline: bool = False) -> str:
    """An expression: the value of a parameter in a text-valued format, then ``close``.

    ``stops`` are the tags that end a value, ``pattern`` what strings inside JSON must match;
    ``inline``: the value follows its tag directly, so a string neither starts nor ends with a
    newline (the parser drops one there as layout)."""
    if schema is False:
        raise _Unforceable("accepts no value")
    types = schema_types({} if schema is True else schema)
    end = _lark_string(close)
    if not types or types == ["string"]:
        string, choices = _string_schema(schema, ctx)
        return _raw_string(g, string, choices, stops, close, inline=inline)
    if "string" not in types:
        # Python's spellings too, as Qwen3-Coder's template writes them (the conversion reads both)
        python = [_lark_string(str(v)) for v, kind in ((True, "boolean"), (False, "boolean"), (None, "null"))
                  if kind in types and _is_valid(v, schema, ctx)]
        value = _alternatives([_json_expr(_guarded(schema, ctx, pattern)), *python])
        return f"{value} {end}"
    if sorted(types) == ["null", "string"]:
        string, choices, null = _nullable_string(schema, ctx)
        return _raw_string(g, string, choices, stops, close, nulls=("null", "None") if null else None, inline=inline)
    raise _Unforceable("mixes strings with other types")


def _raw_string(g: _Lark, schema: dict, choices: list[str] | None, stops: tuple[str, ...], close: str,
                nulls: tuple[str, ...] | None = None, inline: bool = False) -> str:
    """A string value written as it is (none of ``stops`` in it), then ``close``. With ``nulls``
    (a string-or-null parameter, whose conversion reads ``null``/``none`` as null), no string
    that reads as null, and ``nulls`` for null itself: one lexeme, so the lexer never has to
    choose between a null and a string that starts like one. With ``inline``, no string that
    starts or ends with a newline."""
    if choices is not None:
        ok = [v for v in choices if not any(s in v for s in stops) and not (nulls is not None and _py_nullish(v))
              and not (inline and (v.startswith("\n") or v.endswith("\n")))]
        ok += list(nulls or ())
        if not ok:
            raise _Unforceable("has no enum value that can be written")
        return _alternatives([_lark_string(v + close) for v in ok])
    lexeme = _string_lexeme(schema.get("minLength", 0), schema.get("maxLength"), stops, nulls is not None, inline)
    if nulls:
        lexeme = f"({lexeme} | {' | '.join(map(_lark_string, nulls))})"
    return g.rule(f"{lexeme} {_lark_string(close)}", terminal=True)


def _py_nullish(text: str) -> bool:
    return text.strip().lower() in ("null", "none")
