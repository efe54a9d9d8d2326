"""llguidance Lark grammars that force tool calls (for ``tool_choice`` "required" or a named tool).

Each grammar admits only calls in its format, at least one, every call of one of the request's
tools (of ``name`` when given) with arguments matching the tool's JSON schema (``%json``, with
the same bounded whitespace as ``response_format`` schemas, so a small model cannot spend its
whole budget on newlines inside a forced call). Without ``parallel`` a grammar admits exactly
one call; with it, one or more. Every text a grammar admits is read back by the format's parser
as exactly those calls (``tests/api/toolcalls/test_forcing_grammars.py`` samples both sides).
The formats that write arguments one by one (pythonic, Qwen3-Coder, GLM, Gemma) get grammars
built from the schema, parameter by parameter; where a format cannot carry part of a schema they
narrow, never widen (see the section below and ``docs/tools.md``).

The markers are written as text literals: that fits vocabularies where they are ordinary (added,
non-special) tokens, as ``<tool_call>`` is in Qwen's; where a marker is a special token, the
model has to spell it out (the output, decoded with special tokens kept, reads the same).
Formats with two layouts (Mistral, DeepSeek) admit both, so the model keeps the one it was
trained on.
"""

from __future__ import annotations

import json
import keyword
import re
from dataclasses import dataclass
from typing import Any

from mlxctl.api.toolcalls.base import parameters_schema, tool_functions
from mlxctl.api.toolcalls.values import schema_types
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


# -- formats whose arguments are a bare JSON object after the tool's name ------------------------


def arguments_schema(fn: dict) -> dict:
    """A tool's arguments schema (an object schema when it has none), with bounded whitespace."""
    schema = parameters_schema(fn) or {"type": "object"}
    return {**schema, "x-guidance": {"whitespace_flexible": True, "whitespace_pattern": JSON_WHITESPACE}}


def _args_rules(functions: dict[str, dict]) -> list[str]:
    """One ``args_N: %json {...}`` rule per allowed tool, in order."""
    return [f"args_{i}: %json {json.dumps(arguments_schema(fn), ensure_ascii=False)}"
            for i, fn in enumerate(functions.values())]


def _branches(rule: str, functions: dict[str, dict], head: str, tail: str = "") -> str:
    """Rule ``rule``: one branch per allowed tool, ``head`` (its ``{name}`` the tool's name as a
    literal), the tool's ``args_N``, then ``tail`` (Lark text)."""
    branches = [f"{head.format(name=_lark_string(fn_name))} args_{i}{tail}" for i, fn_name in enumerate(functions)]
    return f"{rule}: {' | '.join(branches)}"


def _call_array(tools: list[dict], name: str | None, parallel: bool) -> str:
    """Rule ``array``: a JSON array of ``{"name", "arguments"}`` objects (one unless ``parallel``)."""
    objects = call_object_schema(tools, name, "arguments")
    guidance = objects.pop("x-guidance")
    array = {"type": "array", "items": objects, "minItems": 1, "x-guidance": guidance}
    if not parallel:
        array["maxItems"] = 1
    return f"array: %json {json.dumps(array, ensure_ascii=False)}"


def _one_or_more(rule: str, parallel: bool, separator: str | None = None) -> str:
    """``rule``, or with ``parallel`` one or more of it (``separator`` text between them)."""
    if not parallel:
        return rule
    sep = "" if separator is None else _lark_string(separator) + " "
    return f"{rule} ({sep}{rule})*"


def mistral_grammar(tools: list[dict], name: str | None, parallel: bool = False) -> str:
    """``[TOOL_CALLS]`` then a JSON array of call objects (the v3-v7 layout) or
    ``NAME[ARGS]{...}`` (v11+; several calls repeat the marker)."""
    from mlxctl.api.toolcalls import mistral

    functions = _functions(tools, name)
    marker = _lark_string(mistral.MARKER)
    return "\n".join(
        [
            "%llguidance {}",
            f"start: {marker} array | {_one_or_more('call', parallel)}",
            f"call: {marker} named",
            _branches("named", functions, f"{{name}} {_lark_string(mistral.ARGS)}"),
            *_args_rules(functions),
            _call_array(tools, name, parallel),
        ]
    )


def granite_grammar(tools: list[dict], name: str | None, parallel: bool = False) -> str:
    """``<|tool_call|>`` then a JSON array of call objects."""
    from mlxctl.api.toolcalls import granite

    return "\n".join(
        ["%llguidance {}", f"start: {_lark_string(granite.MARKER)} array", _call_array(tools, name, parallel)]
    )


def deepseek_v3_grammar(tools: list[dict], name: str | None, parallel: bool = False) -> str:
    """A calls section; each call is V3/R1's ``function<｜tool▁sep｜>NAME`` and a fenced JSON
    block, or V3.1's ``NAME<｜tool▁sep｜>{...}``. Calls may be separated by a newline."""
    from mlxctl.api.toolcalls import deepseek_v3 as ds

    functions = _functions(tools, name)
    sep = _lark_string(ds.SEP)
    fence_open, fence_close = _lark_string("\n```json\n"), _lark_string("\n```")
    calls = 'call ("\\n"? call)*' if parallel else "call"
    return "\n".join(
        [
            "%llguidance {}",
            f"start: {_lark_string(ds.CALLS_BEGIN)} {calls} {_lark_string(ds.CALLS_END)}",
            f"call: {_lark_string(ds.CALL_BEGIN)} (v3 | v31) {_lark_string(ds.CALL_END)}",
            _branches("v3", functions, f'{_lark_string("function" + ds.SEP)} {{name}} {fence_open}', f" {fence_close}"),
            _branches("v31", functions, f"{{name}} {sep}"),
            *_args_rules(functions),
        ]
    )


def kimi_k2_grammar(tools: list[dict], name: str | None, parallel: bool = False) -> str:
    """A calls section; each call is ``functions.NAME:IDX`` (IDX up to 4 digits) then its
    arguments object."""
    from mlxctl.api.toolcalls import kimi_k2 as kimi

    functions = _functions(tools, name)
    head = f'{_lark_string("functions.")} {{name}} ":" INDEX {_lark_string(kimi.ARGS_BEGIN)}'
    return "\n".join(
        [
            "%llguidance {}",
            (f"start: {_lark_string(kimi.SECTION_BEGINS[0])} {_one_or_more('call', parallel)} "
             f"{_lark_string(kimi.SECTION_ENDS[0])}"),
            f"call: {_lark_string(kimi.CALL_BEGIN)} named {_lark_string(kimi.CALL_END)}",
            _branches("named", functions, head),
            "INDEX: /[0-9]{1,4}/",
            *_args_rules(functions),
        ]
    )


def gpt_oss_grammar(tools: list[dict], name: str | None, parallel: bool = False) -> str:
    """Harmony: ``<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}``;
    with ``parallel``, more calls follow as ``<|call|><|start|>assistant`` and another such
    message. The grammar ends with the arguments: ``<|call|>`` is a stop token."""
    functions = _functions(tools, name)
    head = f'{_lark_string("<|channel|>commentary to=functions.")} {{name}} {_lark_string(" <|constrain|>json<|message|>")}'
    return "\n".join(
        [
            "%llguidance {}",
            f"start: {_one_or_more('named', parallel, '<|call|><|start|>assistant')}",
            _branches("named", functions, head),
            *_args_rules(functions),
        ]
    )


# == formats that write the arguments one by one ===================================================
#
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
# what Python's str.strip() strips, as a Rust regex class (Unicode White_Space and \\x1c-\\x1f)
_PY_SPACE = (r"[\t\n\x0B\x0C\r\x1C-\x1F \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}"
             r"\x{205F}\x{3000}]")
_PY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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


def _json_expr(schema: Any) -> str:
    """``%json`` of a (whole) schema, with the bounded whitespace of every forcing grammar."""
    if schema is True:
        schema = {}
    guidance = {"whitespace_flexible": True, "whitespace_pattern": JSON_WHITESPACE}
    return f"%json {json.dumps({**schema, 'x-guidance': guidance}, ensure_ascii=False)}"


def _rx(text: str) -> str:
    """``text`` as a Rust regex matching it literally (other than letters and digits, hex escapes)."""
    return "".join(c if c.isascii() and c.isalnum() else f"\\x{{{ord(c):X}}}" for c in text)


def _string_lexeme(min_len: int, max_len: int | None, stops: tuple[str, ...], not_null: bool = False) -> str:
    """A lexeme expression: text of ``min_len`` to ``max_len`` characters containing none of
    ``stops`` (and, with ``not_null``, not ``null``/``none`` in any case, blank around)."""
    # a negation needs a positive part beside it: alone in a concatenation, llguidance reads it wrong
    parts = [f"/(?s:.){{{min_len},{'' if max_len is None else max_len}}}/"]
    if stops:
        parts.append(f"~/(?s:.*)({'|'.join(_rx(s) for s in stops)})(?s:.*)/")
    if not_null:
        parts.append(f"~/{_PY_SPACE}*(?i:null|none){_PY_SPACE}*/")
    return f"({' & '.join(parts)})"


class _Lark:
    """The rules of a grammar under construction, with fresh names."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.name_prefix = ""  # tells apart the rules of grammars that are joined
        self._count = 0

    def name(self, terminal: bool = False) -> str:
        self._count += 1
        return f"{'T' if terminal else 'r'}_{self.name_prefix}{self._count}"

    def rule(self, body: str, terminal: bool = False, name: str | None = None) -> str:
        name = name or self.name(terminal)
        self.lines.append(f"{name}: {body}")
        return name

    def sequence(self, items: list[tuple[str, bool]], sep: str | None = None) -> str:
        """An expression of ``items`` (expression, required) in order, each required one once,
        each optional one at most once, with ``sep`` (an expression) between neighbours; ''
        when there are none."""
        if sep is None:
            return " ".join(e if required else f"({e})?" for e, required in items)
        tails = [""] * (len(items) + 1)  # tails[k]: the items from k on, each after a separator
        for k in reversed(range(1, len(items))):
            e, required = items[k]
            piece = f"{sep} {e}" if required else f"({sep} {e})?"
            tails[k] = self.rule(f"{piece} {tails[k + 1]}".strip())
        firsts = []
        for j, (e, required) in enumerate(items):  # the first member written is j
            firsts.append(f"{e} {tails[j + 1]}".strip())
            if required:
                return " | ".join(firsts) if len(firsts) == 1 else f"({' | '.join(firsts)})"
        return f"({' | '.join(firsts)})?" if firsts else ""


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


def _alternatives(exprs: list[str]) -> str:
    return exprs[0] if len(exprs) == 1 else f"({' | '.join(exprs)})"


# -- pythonic -----------------------------------------------------------------------------------------


def _python_name(name: str, dotted: bool = False) -> bool:
    parts = name.split(".") if dotted else [name]
    return all(_PY_NAME.fullmatch(p) and not keyword.iskeyword(p) for p in parts)


def pythonic_grammar(tools: list[dict], name: str | None, parallel: bool = False) -> str:
    """``[NAME(key=<json>, ...)]`` (one call, or with ``parallel`` one or more), optionally in
    ``<|python_start|>``/``<|python_end|>``. Values are JSON, which Python reads as the same
    literal (``true``/``false``/``null`` are read as JSON's); a tool whose name is not a dotted
    Python name, or a parameter whose name is not an identifier, cannot be written."""
    from mlxctl.api.toolcalls import pythonic

    g = _Lark()

    def call(fn_name: str, fn: dict) -> str:
        if not _python_name(fn_name, dotted=True):
            raise _Unforceable("its name is not a Python name")
        params, ctx = _context(fn)

        def member(param: _Param) -> str:
            if not _python_name(param.key):
                raise _Unforceable("is not a Python identifier")
            if param.schema is False:
                raise _Unforceable("accepts no value")
            return f"{_lark_string(param.key + '=')} {_json_expr(_with_defs(param.schema, ctx, True))}"

        args = g.sequence(_members(params, member), "SEP")
        return " ".join(filter(None, [_lark_string(fn_name + "("), args, '")"']))

    branches = _tool_branches(_functions(tools, name), "pythonic", call)
    calls = "call (SEP call)*" if parallel else "call"
    return "\n".join(
        [
            "%llguidance {}",
            (f"start: {_lark_string(pythonic.PYTHON_START)}? \"[\" {calls} \"]\" "
             f"{_lark_string(pythonic.PYTHON_END)}?"),
            f"call: {' | '.join(branches)}",
            "SEP: /, ?/",
            *g.lines,
        ]
    )


# -- text values: Qwen3-Coder and GLM -------------------------------------------------------------------
#
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
    ref = {"$ref": f"#/$defs/{_SAFE_ANY}"}
    used: list[bool] = []  # whether ``ref`` was written

    def safe(value: Any) -> bool:
        if isinstance(value, str):
            return re.fullmatch(pattern.strip("^$"), value) is not None
        if isinstance(value, list):
            return all(map(safe, value))
        if isinstance(value, dict):
            return all(safe(k) and safe(v) for k, v in value.items())
        return True

    def walk(s: Any) -> Any:
        if s is True:
            used.append(True)
            return ref
        if not isinstance(s, dict):
            return s
        s = dict(s)
        for k in ("anyOf", "oneOf", "allOf", "prefixItems"):
            if isinstance(s.get(k), list):
                s[k] = [walk(b) for b in s[k]]
        for k in ("properties", "$defs", "definitions"):
            if isinstance(s.get(k), dict):
                s[k] = {n: walk(b) for n, b in s[k].items()}
        if "contains" in s:  # (``not`` and ``if`` are left alone: narrowing them would widen)
            s["contains"] = walk(s["contains"])
        if "patternProperties" in s or "propertyNames" in s:
            raise _Unforceable("uses patternProperties or propertyNames")
        if isinstance(s.get("enum"), list):
            s["enum"] = [v for v in s["enum"] if safe(v)]
            if not s["enum"]:
                raise _Unforceable("has no enum value that can be written")
        if "const" in s and not safe(s["const"]):
            raise _Unforceable("has a const value that cannot be written")
        if "$ref" in s:
            return s  # its definition is guarded
        kind = s.get("type")
        if kind is None:
            if _validation_keys(s) & {"anyOf", "oneOf", "allOf", "enum", "const"}:
                return s  # its branches or values are guarded
            if not _validation_keys(s):
                return walk(True)
            kind = s["type"] = ["null", "boolean", "number", "string", "array", "object"]  # spelled out
        kinds = [kind] if isinstance(kind, str) else kind
        if "string" in kinds:
            if "pattern" in s:
                s["allOf"] = [*s.get("allOf", []), {"pattern": pattern}]
            else:
                s["pattern"] = pattern
        if "object" in kinds:
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
                    s["additionalProperties"], s["patternProperties"] = False, {pattern: walk(extra)}
        if "array" in kinds:
            items = s.get("items", True)
            if isinstance(items, list):
                raise _Unforceable("uses a list of items")
            s["items"] = walk(items)
        return s

    anything = {"anyOf": [
        {"type": ["null", "boolean", "number"]},
        {"type": "string", "pattern": pattern},
        {"type": "array", "items": ref},
        {"type": "object", "additionalProperties": False, "patternProperties": {pattern: ref}},
    ]}
    out = walk(schema)
    if not isinstance(out, dict):
        return out
    out = dict(out)
    for k in ("$defs", "definitions"):
        if k in ctx and '"$ref"' in json.dumps(schema):
            out[k] = {**{n: _or_nothing(walk, d) for n, d in ctx[k].items()}, **out.get(k, {})}
    if used:
        out["$defs"] = {**out.get("$defs", {}), _SAFE_ANY: anything}
    return out


def _or_nothing(walk, schema: Any) -> Any:
    """``walk(schema)``, or a schema nothing matches when it cannot be written (a definition
    the value may not even use)."""
    try:
        return walk(schema)
    except _Unforceable:
        return False


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


def _text_value(g: _Lark, schema: Any, ctx: dict, stops: tuple[str, ...], close: str, pattern: str) -> str:
    """An expression: the value of a parameter in a text-valued format, then ``close``.

    ``stops`` are the tags that end a value, ``pattern`` what strings inside JSON must match."""
    if schema is False:
        raise _Unforceable("accepts no value")
    types = schema_types({} if schema is True else schema)
    end = _lark_string(close)
    if not types or types == ["string"]:
        string, choices = _string_schema(schema, ctx)
        return _raw_string(g, string, choices, stops, close)
    if "string" not in types:
        # Python's spellings too, as Qwen3-Coder's template writes them (the conversion reads both)
        python = [_lark_string(str(v)) for v, kind in ((True, "boolean"), (False, "boolean"), (None, "null"))
                  if kind in types and _is_valid(v, schema, ctx)]
        value = _alternatives([_json_expr(_guarded(schema, ctx, pattern)), *python])
        return f"{value} {end}"
    if sorted(types) == ["null", "string"]:
        string, choices, null = _nullable_string(schema, ctx)
        return _raw_string(g, string, choices, stops, close, nulls=("null", "None") if null else None)
    raise _Unforceable("mixes strings with other types")


def _raw_string(g: _Lark, schema: dict, choices: list[str] | None, stops: tuple[str, ...], close: str,
                nulls: tuple[str, ...] | None = None) -> str:
    """A string value written as it is (none of ``stops`` in it), then ``close``. With ``nulls``
    (a string-or-null parameter, whose conversion reads ``null``/``none`` as null), no string
    that reads as null, and ``nulls`` for null itself: one lexeme, so the lexer never has to
    choose between a null and a string that starts like one."""
    if choices is not None:
        ok = [v for v in choices if not any(s in v for s in stops) and not (nulls is not None and _py_nullish(v))]
        ok += list(nulls or ())
        if not ok:
            raise _Unforceable("has no enum value that can be written")
        return _alternatives([_lark_string(v + close) for v in ok])
    lexeme = _string_lexeme(schema.get("minLength", 0), schema.get("maxLength"), stops, nulls is not None)
    if nulls:
        lexeme = f"({lexeme} | {' | '.join(map(_lark_string, nulls))})"
    return g.rule(f"{lexeme} {_lark_string(close)}", terminal=True)


def _py_nullish(text: str) -> bool:
    return text.strip().lower() in ("null", "none")


def _text_call_params(g: _Lark, fn: dict, key_ok, member) -> str:
    params, ctx = _context(fn)

    def item(param: _Param) -> str:
        why = key_ok(param.key)
        if why:
            raise _Unforceable(why)
        return member(param, ctx)

    return g.sequence(_members(params, item))


def _tag_name_problem(text: str) -> str | None:
    from mlxctl.api.toolcalls.blocks import MAX_NAME

    if not text or text != text.strip() or any(c in text for c in "<>\n") or len(text) > MAX_NAME:
        return "cannot be written in a tag"
    return None


_QWEN_PATTERN = "^(?:[^<]|<+[^</p])*<*$"
_GLM_PATTERN = "^(?:[^<]|<+[^</])*<*$"


def qwen3_coder_grammar(tools: list[dict], name: str | None, parallel: bool = False) -> str:
    """``<tool_call>\\n<function=NAME>\\n`` then ``<parameter=KEY>\\nVALUE\\n</parameter>\\n`` per
    argument, then ``</function>\\n</tool_call>`` (the template's layout); with ``parallel``, one
    or more such blocks separated by a newline. A string's value is its text, any other's JSON."""
    from mlxctl.api.toolcalls import qwen3_coder as q

    g = _Lark()
    stops = (q.PARAMETER_END, q.PARAMETER, q.FUNCTION_END, q.END)
    close = "\n" + q.PARAMETER_END + "\n"

    def member(param: _Param, ctx: dict) -> str:
        value = _text_value(g, param.schema, ctx, stops, close, _QWEN_PATTERN)
        return f"{_lark_string(f'{q.PARAMETER}{param.key}>' + chr(10))} {value}"

    def call(fn_name: str, fn: dict) -> str:
        if _tag_name_problem(fn_name):
            raise _Unforceable("its name cannot be written in a tag")
        args = _text_call_params(g, fn, _tag_name_problem, member)
        head = _lark_string(f"{q.FUNCTION}{fn_name}>\n")
        return " ".join(filter(None, [head, args, _lark_string(q.FUNCTION_END + "\n")]))

    branches = _tool_branches(_functions(tools, name), "qwen3_coder", call)
    return "\n".join(
        [
            "%llguidance {}",
            f"start: {_one_or_more('block', parallel, chr(10))}",
            f"block: {_lark_string(q.START + chr(10))} call {_lark_string(q.END)}",
            f"call: {' | '.join(branches)}",
            *g.lines,
        ]
    )


def _glm_key_problem(key: str) -> str | None:
    from mlxctl.api.toolcalls import glm4
    from mlxctl.api.toolcalls.blocks import MAX_NAME

    if not key or key != key.strip() or glm4.KEY_END in key or len(key) > MAX_NAME:
        return "cannot be written as an <arg_key>"
    return None


def glm4_grammar(tools: list[dict], name: str | None, parallel: bool = False) -> str:
    """``<tool_call>NAME`` then ``<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>`` per
    argument, then ``</tool_call>``, with or without GLM-4.5's newlines between the parts; with
    ``parallel``, one or more such blocks, a newline between them optional. A string's value is
    its text, any other's JSON."""
    from mlxctl.api.toolcalls import glm4

    g = _Lark()
    nl = '"\\n"?'

    def member(param: _Param, ctx: dict) -> str:
        value = _text_value(g, param.schema, ctx, (glm4.VALUE_END,), glm4.VALUE_END, _GLM_PATTERN)
        key = _lark_string(f"{glm4.KEY}{param.key}{glm4.KEY_END}")
        return f"{nl} {key} {nl} {_lark_string(glm4.VALUE)} {value}"

    def call(fn_name: str, fn: dict) -> str:
        if not fn_name or "<" in fn_name or any(c.isspace() for c in fn_name):
            raise _Unforceable("its name cannot be written before <arg_key>")
        args = _text_call_params(g, fn, _glm_key_problem, member)
        return " ".join(filter(None, [_lark_string(fn_name), args]))

    branches = _tool_branches(_functions(tools, name), "glm4", call)
    return "\n".join(
        [
            "%llguidance {}",
            f'start: {"block (" + nl + " block)*" if parallel else "block"}',
            f"block: {_lark_string(glm4.START)} call {nl} {_lark_string(glm4.END)}",
            f"call: {' | '.join(branches)}",
            *g.lines,
        ]
    )


# -- Gemma ------------------------------------------------------------------------------------------------
#
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
        for combinator in ("anyOf", "oneOf"):
            if combinator in keys:
                return self.union(schema, combinator, ctx)
        other = keys - _GEMMA_KEYWORDS
        if other:
            raise _Unforceable(f"uses {', '.join(sorted(other))}")
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


_OBJECT_KEYWORDS = frozenset({
    "properties", "required", "additionalProperties", "unevaluatedProperties", "minProperties", "maxProperties",
})


def gemma_grammar(tools: list[dict], name: str | None, parallel: bool = False) -> str:
    """``<|tool_call>call:NAME{key:value,...}<tool_call|>`` (Gemma 4, strings between
    ``<|"|>``) or ``<start_function_call>call:NAME{...}<end_function_call>`` (FunctionGemma,
    strings between ``<escape>``); with ``parallel``, one or more blocks of the same layout."""
    from mlxctl.api.toolcalls import gemma

    functions = _functions(tools, name)
    layouts, refusals = [], []
    for i, (start, (end, quote)) in enumerate(gemma.MARKERS.items()):
        g = _Lark()
        g.name_prefix = f"{i}_"
        values = _GemmaValues(g, quote, end)

        def call(fn_name: str, fn: dict, values: _GemmaValues = values) -> str:
            if not re.fullmatch(r"[\w.\-]+", fn_name):
                raise _Unforceable("its name cannot be written after call:")
            params, ctx = _context(fn)
            args = values.members(params, ctx)
            return " ".join(filter(None, [_lark_string(f"call:{fn_name}{{"), args, '"}"']))

        try:  # a layout whose delimiter some value needs may still be left the other one
            branches = _tool_branches(functions, "gemma", call)
        except BadInputError as exc:
            refusals.append(exc)
            continue
        block = f"block_{i}: {_lark_string(start)} ({' | '.join(branches)}) {_lark_string(end)}"
        layouts.append((_one_or_more(f"block_{i}", parallel), [block, *g.lines]))
    if not layouts:
        raise refusals[0]
    starts = " | ".join(start for start, _ in layouts)
    return "\n".join(["%llguidance {}", f"start: {starts}", *(line for _, lines in layouts for line in lines)])
