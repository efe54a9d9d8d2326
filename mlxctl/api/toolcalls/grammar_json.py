"""Forcing grammars of the formats whose arguments are one JSON object: Hermes, Llama 3 JSON,
Mistral, Granite, Nemotron, DeepSeek V3, Kimi K2 and gpt-oss (Harmony)."""

from __future__ import annotations

import json

from mlxctl.api.toolcalls.base import parameters_schema
from mlxctl.api.toolcalls.grammar_core import _functions, _lark_string, _one_or_more
from mlxctl.api.toolcalls.schema_defs import hoist
from mlxctl.engine.constraints import JSON_WHITESPACE


def call_object_schema(tools: list[dict], name: str | None, args_key: str) -> dict:
    """JSON schema of ``{"name": NAME, ARGS_KEY: {...}}`` for the allowed tools; the tools'
    definitions are hoisted to its root ``$defs`` (see :mod:`~mlxctl.api.toolcalls.schema_defs`)."""
    branches, defs = [], {}
    for fn_name, fn in _functions(tools, name).items():
        arguments = hoist(parameters_schema(fn) or {"type": "object"}, defs)
        branches.append(
            {
                "type": "object",
                "properties": {"name": {"const": fn_name}, args_key: arguments},
                "required": ["name", args_key],
                "additionalProperties": False,
            }
        )
    schema = branches[0] if len(branches) == 1 else {"anyOf": branches}
    if defs:
        schema = {**schema, "$defs": defs}
    return {**schema, "x-guidance": {"whitespace_flexible": True, "whitespace_pattern": JSON_WHITESPACE}}


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
    guidance, defs = objects.pop("x-guidance"), objects.pop("$defs", None)
    array = {"type": "array", "items": objects, "minItems": 1, "x-guidance": guidance}
    if defs:
        array["$defs"] = defs
    if not parallel:
        array["maxItems"] = 1
    return f"array: %json {json.dumps(array, ensure_ascii=False)}"


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


def nemotron_grammar(tools: list[dict], name: str | None, parallel: bool = False) -> str:
    """``<TOOLCALL>``, a JSON array of call objects, then ``</TOOLCALL>``."""
    from mlxctl.api.toolcalls import nemotron

    return "\n".join(["%llguidance {}", f"start: {_lark_string(nemotron.START)} array {_lark_string(nemotron.END)}",
                      _call_array(tools, name, parallel)])


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
