"""Gemma's forcing grammar (Gemma 4 and FunctionGemma), written in Gemma's own value syntax."""

from __future__ import annotations

import json
import re
from typing import Any

from mlxctl.api.toolcalls.grammar_core import (
    _alternatives,
    _functions,
    _json_expr,
    _Lark,
    _lark_string,
    _one_or_more,
    _string_lexeme,
)
from mlxctl.api.toolcalls.grammar_schema import (
    _NUMBER_KEYWORDS,
    _STRING_KEYWORDS,
    _context,
    _definition,
    _is_valid,
    _members,
    _object_params,
    _Param,
    _tool_branches,
    _Unforceable,
    _validation_keys,
)
from mlxctl.errors import BadInputError

# Gemma's values are typed by their syntax (strings between delimiters, bare numbers and names,
# ``{key:value}`` and ``[...]``), so the grammar follows the schema down: strings (no delimiter
# or end marker in them; lengths), numbers (JSON's, which Gemma reads the same), booleans, null,
# objects (their properties only), arrays (items, lengths), enums and consts, ``anyOf``, type
# lists, ``oneOf`` of distinct types and local ``$ref`` (recursion included). A value of any type
# is written as a string; a string with a ``pattern`` cannot be written.

_GEMMA_BARE_KEY = re.compile(r"[^\s{}\[\],<>\"':]+")
_GEMMA_KEYWORDS = _STRING_KEYWORDS | _NUMBER_KEYWORDS | frozenset({
    "pattern", "properties", "required", "additionalProperties", "unevaluatedProperties", "minProperties",
    "maxProperties", "items", "minItems", "maxItems", "uniqueItems",
})
_OBJECT_KEYWORDS = frozenset({
    "properties", "required", "additionalProperties", "unevaluatedProperties", "minProperties", "maxProperties",
})


class _GemmaValues:
    """Lark expressions of Gemma values for schemas, in one layout (string delimiter, end marker)."""

    def __init__(self, g: _Lark, quote: str, end: str):
        self.g, self.quote, self.end = g, quote, end
        self.refs: dict[str, str] = {}  # $ref -> its rule

    def writable(self, text: str) -> bool:
        return self.quote not in text and self.end not in text

    def key(self, key: str) -> str:
        """A member name, bare where Gemma reads it bare, else between delimiters."""
        if _GEMMA_BARE_KEY.fullmatch(key):
            return key
        if not self.writable(key):
            raise _Unforceable("cannot be written as a Gemma member name")
        return f"{self.quote}{key}{self.quote}"

    def literal(self, value: Any) -> str:
        """A JSON value in Gemma's syntax (_Unforceable when it cannot be written)."""
        if value is None or isinstance(value, bool):
            return json.dumps(value)
        if isinstance(value, (int, float)):
            text = json.dumps(value)
            if not re.fullmatch(r"-?\d+(\.\d+)?([eE][+-]?\d+)?", text):
                raise _Unforceable(f"has a value Gemma cannot write ({text})")
            return text
        if isinstance(value, str):
            if not self.writable(value):
                raise _Unforceable("has a string value Gemma cannot write")
            return f"{self.quote}{value}{self.quote}"
        if isinstance(value, list):
            return "[" + ",".join(self.literal(v) for v in value) + "]"
        return "{" + ",".join(f"{self.key(k)}:{self.literal(v)}" for k, v in value.items()) + "}"

    def value(self, schema: Any, ctx: dict) -> str:
        if schema is False:
            raise _Unforceable("accepts no value")
        if schema is True or not _validation_keys(schema):
            return self.string(0, None)  # any value: a string is one
        keys = _validation_keys(schema)
        if "$ref" in schema:
            if keys != {"$ref"}:
                raise _Unforceable("uses $ref beside other keywords")
            return self.ref(schema["$ref"], ctx)
        if "enum" in keys or "const" in keys:
            return self.choices(schema, ctx)
        for combinator in ("anyOf", "oneOf"):
            if combinator in keys:
                return self.union(schema, combinator, ctx)
        other = keys - _GEMMA_KEYWORDS
        if other:
            raise _Unforceable(f"uses {', '.join(sorted(other))}")
        return self.types(schema, ctx)

    def choices(self, schema: dict, ctx: dict) -> str:
        """The enum's (or const's) values that the schema accepts and Gemma can write."""
        values = list(schema.get("enum", [schema.get("const")]))
        written = []
        for v in values:
            if ("const" not in schema or v == schema["const"]) and _is_valid(v, schema, ctx):
                try:
                    written.append(_lark_string(self.literal(v)))
                except _Unforceable:
                    pass
        if not written:
            raise _Unforceable("has no enum value that can be written")
        return _alternatives(list(dict.fromkeys(written)))

    def types(self, schema: dict, ctx: dict) -> str:
        """A value of any of the schema's types that can be written."""
        kind = schema.get("type", "string")  # untyped: only its string keywords apply to a string
        kinds = [kind] if isinstance(kind, str) else list(kind)
        if "number" in kinds and "integer" in kinds:  # numbers include integers
            kinds.remove("integer")
        out, why = [], "has no type that can be written"
        for k in dict.fromkeys(kinds):
            try:
                out.append(self.typed(k, schema, ctx))
            except _Unforceable as exc:
                why = str(exc)
        if not out:
            raise _Unforceable(why)
        return _alternatives(out)

    def union(self, schema: dict, combinator: str, ctx: dict) -> str:
        if _validation_keys(schema) != {combinator} or not isinstance(schema[combinator], list):
            raise _Unforceable(f"uses {combinator} beside other keywords")
        branches = schema[combinator]
        if combinator == "oneOf":  # exclusive only when every branch has its own, single type
            kinds = [b.get("type") if isinstance(b, dict) else None for b in branches]
            if (not all(isinstance(k, str) for k in kinds) or len(set(kinds)) != len(kinds)
                    or {"integer", "number"} <= set(kinds)):
                raise _Unforceable("uses oneOf of branches that may overlap")
        out = []
        for branch in branches:
            try:
                out.append(self.value(branch, ctx))
            except _Unforceable:
                pass
        if not out:
            raise _Unforceable(f"has no {combinator} branch that can be written")
        return _alternatives(out)

    def ref(self, ref: str, ctx: dict) -> str:
        if ref not in self.refs:
            self.refs[ref] = name = self.g.name()
            try:
                self.g.rule(self.value(_definition(ref, ctx), ctx), name=name)
            except _Unforceable:
                del self.refs[ref]
                raise
        return self.refs[ref]

    def typed(self, kind: str, schema: dict, ctx: dict) -> str:
        if kind == "string":
            if "pattern" in schema:
                raise _Unforceable("uses pattern on a string")
            return self.string(schema.get("minLength", 0), schema.get("maxLength"))
        if kind in ("integer", "number"):
            return _json_expr({"type": kind} | {k: v for k, v in schema.items() if k in _NUMBER_KEYWORDS})
        if kind == "boolean":
            return '("true" | "false")'
        if kind == "null":
            return '"null"'
        if kind == "object":
            return self.object(schema, ctx)
        if kind == "array":
            return self.array(schema, ctx)
        raise _Unforceable(f"has an unknown type {kind!r}")

    def string(self, min_len: int, max_len: int | None) -> str:
        q = _lark_string(self.quote)
        return self.g.rule(f"{q} {_string_lexeme(min_len, max_len, (self.quote, self.end))} {q}", terminal=True)

    def members(self, params: list[_Param], ctx: dict) -> str:
        def member(param: _Param) -> str:
            return f"{_lark_string(self.key(param.key) + ':')} {self.value(param.schema, ctx)}"

        return self.g.sequence(_members(params, member), '","')

    def object(self, schema: dict, ctx: dict) -> str:
        object_schema = {k: v for k, v in schema.items() if k in _OBJECT_KEYWORDS} | {"type": "object"}
        return " ".join(filter(None, ['"{"', self.members(_object_params(object_schema), ctx), '"}"']))

    def array(self, schema: dict, ctx: dict) -> str:
        if schema.get("uniqueItems") is True:
            raise _Unforceable("uses uniqueItems")
        items = schema.get("items", True)
        least, most = schema.get("minItems", 0), schema.get("maxItems")
        if isinstance(items, list):
            raise _Unforceable("uses a list of items")
        if items is False or most == 0:
            if least:
                raise _Unforceable("cannot have items")
            return '"[" "]"'
        item = self.g.rule(self.value(items, ctx))
        more = f"{{{max(least - 1, 0)},{'' if most is None else most - 1}}}"
        body = f'{item} ("," {item}){more}'
        return f'"[" {body} "]"' if least else f'"[" ({body})? "]"'


def gemma_grammar(tools: list[dict], name: str | None, parallel: bool = False) -> str:
    """``<|tool_call>call:NAME{key:value,...}<tool_call|>`` (Gemma 4, strings between
    ``<|"|>``) or ``<start_function_call>call:NAME{...}<end_function_call>`` (FunctionGemma,
    strings between ``<escape>``); with ``parallel``, one or more blocks of the same layout."""
    from mlxctl.api.toolcalls import gemma

    functions = _functions(tools, name)
    layouts, refusals = [], []
    for i, (start, (end, quote)) in enumerate(gemma.MARKERS.items()):
        try:  # a layout whose delimiter some value needs may still be left the other one
            layouts.append(_gemma_layout(functions, i, start, end, quote, parallel))
        except BadInputError as exc:
            refusals.append(exc)
    if not layouts:
        raise refusals[0]
    starts = " | ".join(start for start, _ in layouts)
    return "\n".join(["%llguidance {}", f"start: {starts}", *(line for _, lines in layouts for line in lines)])


def _gemma_layout(functions: dict[str, dict], i: int, start: str, end: str, quote: str,
                  parallel: bool) -> tuple[str, list[str]]:
    """Layout ``i`` (its blocks between ``start`` and ``end``, strings between ``quote``): its
    expression for ``start`` and its rules; a 400 when it can write none of the tools."""
    g = _Lark()
    g.name_prefix = f"{i}_"
    values = _GemmaValues(g, quote, end)

    def call(fn_name: str, fn: dict) -> str:
        if not re.fullmatch(r"[\w.\-]+", fn_name):
            raise _Unforceable("its name cannot be written after call:")
        params, ctx = _context(fn)
        args = values.members(params, ctx)
        return " ".join(filter(None, [_lark_string(f"call:{fn_name}{{"), args, '"}"']))

    branches = _tool_branches(functions, "gemma", call)
    block = f"block_{i}: {_lark_string(start)} ({' | '.join(branches)}) {_lark_string(end)}"
    return _one_or_more(f"block_{i}", parallel), [block, *g.lines]
