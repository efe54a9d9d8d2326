"""The forcing grammar of DeepSeek V3.2's DSML calls, written parameter by parameter.

``｜DSML｜`` is one token in DeepSeek's vocabulary, in the middle of every tag, and a terminal is
matched on text only (:mod:`mlxctl.engine.token_markers`). So a string value's terminal ends at
the ``</`` of its end tag and the rest of the tag, ``｜DSML｜parameter>``, is a literal of the rule,
which the engine writes as the token and text where the tokenizer has it; a string cannot hold
``</`` (nor can strings inside JSON values).
"""

from __future__ import annotations

from typing import Any

from mlxctl.api.toolcalls.grammar_core import _alternatives, _functions, _json_expr, _Lark, _lark_string, _one_or_more
from mlxctl.api.toolcalls.grammar_schema import _context, _members, _Param, _resolve, _tool_branches, _Unforceable
from mlxctl.api.toolcalls.grammar_text import _guarded, _nullable_string, _raw_string, _string_schema
from mlxctl.api.toolcalls.values import schema_types

_PATTERN = "^(?:[^<]|<+[^</])*<*$"  # strings inside a JSON value never hold "</"
_STOPS = ("</",)


def _name_problem(text: str) -> str | None:
    from mlxctl.api.toolcalls.blocks import MAX_NAME

    if not text or any(c in text for c in '"<>\n') or len(text) > MAX_NAME:
        return "cannot be written in a DSML tag"
    return None


def _value(g: _Lark, schema: Any, ctx: dict, head: str) -> str:
    """``head`` (the parameter tag up to ``string=``), the flag, the value and its end tag."""
    from mlxctl.api.toolcalls import deepseek_v32 as d

    if schema is False:
        raise _Unforceable("accepts no value")
    text, as_json = _lark_string(head + '"true">'), _lark_string(head + '"false">')
    rest = _lark_string(d.PARAMETER_END.removeprefix("</"))
    resolved = _resolve({} if schema is True else schema, ctx)  # the flag says the type: refs may be followed
    if resolved is False:
        raise _Unforceable("accepts no value")
    types = schema_types(resolved if isinstance(resolved, dict) else {})
    if not types or types == ["string"]:
        string, choices = _string_schema(schema, ctx)
        return f"{text} {_raw_string(g, string, choices, _STOPS, '</')} {rest}"
    if "string" not in types:
        return f"{as_json} {_json_expr(_guarded(schema, ctx, _PATTERN))} {_lark_string(d.PARAMETER_END)}"
    if sorted(types) == ["null", "string"]:
        string, choices, null = _nullable_string(schema, ctx)
        branches = [f"{text} {_raw_string(g, string, choices, _STOPS, '</')} {rest}"]
        if null:
            branches.append(f"{as_json} {_lark_string('null' + d.PARAMETER_END)}")
        return _alternatives(branches)
    raise _Unforceable("mixes strings with other types")


def deepseek_v32_grammar(tools: list[dict], name: str | None, parallel: bool = False) -> str:
    """``<｜DSML｜function_calls>`` then, per call, ``<｜DSML｜invoke name="NAME">`` and a
    ``<｜DSML｜parameter name="KEY" string="true|false">VALUE</｜DSML｜parameter>`` line per
    argument, then ``</｜DSML｜invoke>`` and ``</｜DSML｜function_calls>``, in the layout of
    DeepSeek's encoder; with ``parallel``, one or more invokes. A string's value is its text
    (``string="true"``), any other's JSON."""
    from mlxctl.api.toolcalls import deepseek_v32 as d

    g = _Lark()

    def member(param: _Param, ctx: dict) -> str:
        if _name_problem(param.key):
            raise _Unforceable("cannot be written in a DSML tag")
        head = d.PARAMETER + param.key + '" string='
        return _value(g, param.schema, ctx, head) + ' "\\n"'

    def call(fn_name: str, fn: dict) -> str:
        if _name_problem(fn_name):
            raise _Unforceable("its name cannot be written in a DSML tag")
        params, ctx = _context(fn)
        args = g.sequence(_members(params, lambda p: member(p, ctx)))
        head = _lark_string(f'{d.INVOKE}{fn_name}">\n')
        # each call ends with its newline: a newline between calls and one before the block's end
        # tag, both lexemes of their own, would leave the lexer no way to tell them apart
        return " ".join(filter(None, [head, args, '"\\n"?', _lark_string(d.INVOKE_END + "\n")]))

    branches = _tool_branches(_functions(tools, name), "deepseek_v32", call)
    calls = _one_or_more("call", parallel)
    begin, end = _lark_string(d.CALLS_BEGIN + "\n"), _lark_string(d.CALLS_END)
    return "\n".join(["%llguidance {}", f"start: {begin} {calls} {end}", f"call: {' | '.join(branches)}", *g.lines])
