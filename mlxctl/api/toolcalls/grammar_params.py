"""Forcing grammars built parameter by parameter from the schema: pythonic, Qwen3-Coder (and
Seed-OSS and MiniMax-M2, its structure under other tags) and GLM."""

from __future__ import annotations

import keyword
import re

from mlxctl.api.toolcalls.grammar_core import (
    _functions,
    _json_expr,
    _Lark,
    _lark_string,
    _one_or_more,
)
from mlxctl.api.toolcalls.grammar_schema import (
    _context,
    _members,
    _Param,
    _tool_branches,
    _Unforceable,
    _with_defs,
)
from mlxctl.api.toolcalls.grammar_text import _text_value

# -- pythonic -----------------------------------------------------------------------------------------

_PY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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


# -- Qwen3-Coder and GLM: text values (see grammar_text) -------------------------------------------------


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


def _blocks_grammar(start: str, block: str, branches: list[str], g: _Lark) -> str:
    """A grammar whose ``start`` is made of ``block`` rules, each around a ``call`` (one of
    ``branches``), then the rules in ``g``."""
    return "\n".join(
        ["%llguidance {}", f"start: {start}", f"block: {block}", f"call: {' | '.join(branches)}", *g.lines]
    )


_QWEN_PATTERN = "^(?:[^<]|<+[^</p])*<*$"
_GLM_PATTERN = "^(?:[^<]|<+[^</])*<*$"


def qwen3_coder_grammar(tools: list[dict], name: str | None, parallel: bool = False) -> str:
    """``<tool_call>\\n<function=NAME>\\n`` then ``<parameter=KEY>\\nVALUE\\n</parameter>\\n`` per
    argument, then ``</function>\\n</tool_call>`` (the template's layout); with ``parallel``, one
    or more such blocks separated by a newline. A string's value is its text, any other's JSON."""
    from mlxctl.api.toolcalls.qwen3_coder import Qwen3CoderParser

    return _function_tags_grammar(Qwen3CoderParser, tools, name, parallel, inline=False)


def seed_oss_grammar(tools: list[dict], name: str | None, parallel: bool = False) -> str:
    """``<seed:tool_call>\\n`` then per call ``<function=NAME>\\n``, per argument
    ``<parameter=KEY>VALUE</parameter>\\n``, then ``</function>\\n``, and ``</seed:tool_call>``
    (the template's layout); with ``parallel``, one or more calls in the block, a blank line
    between them optional. A string's value is its text (not starting or ending with a newline),
    any other's JSON."""
    from mlxctl.api.toolcalls.seed_oss import SeedOssParser

    return _function_tags_grammar(SeedOssParser, tools, name, parallel, inline=True)


def minimax_m2_grammar(tools: list[dict], name: str | None, parallel: bool = False) -> str:
    """``<minimax:tool_call>\\n`` then per call ``<invoke name="NAME">\\n``, per argument
    ``<parameter name="KEY">VALUE</parameter>\\n``, then ``</invoke>\\n``, and
    ``</minimax:tool_call>`` (the template's layout); with ``parallel``, one or more calls in the
    block. Values as in :func:`seed_oss_grammar`."""
    from mlxctl.api.toolcalls.minimax_m2 import MiniMaxM2Parser

    return _function_tags_grammar(MiniMaxM2Parser, tools, name, parallel, inline=True)


def _function_tags_grammar(fmt, tools: list[dict], name: str | None, parallel: bool, inline: bool) -> str:
    """The grammar of a format with Qwen3-Coder's structure (``fmt``, its parser class, gives the
    tags). ``inline``: values follow their tags directly and every call of a ``parallel`` output
    is in one block (Seed-OSS, MiniMax-M2); otherwise values sit between newlines and each call
    has its block (Qwen3-Coder)."""
    g = _Lark()
    stops = (fmt.PARAMETER_END, fmt.PARAMETER, fmt.FUNCTION_END, fmt.END)
    nl = "" if inline else "\n"
    close = nl + fmt.PARAMETER_END + "\n"

    def tag_problem(text: str) -> str | None:
        return _tag_name_problem(text) or (None if fmt.read_name(fmt.tag_text(text)) == text
                                           else "cannot be written in a tag")

    def member(param: _Param, ctx: dict) -> str:
        value = _text_value(g, param.schema, ctx, stops, close, _QWEN_PATTERN, inline)
        return f"{_lark_string(f'{fmt.PARAMETER}{fmt.tag_text(param.key)}>' + nl)} {value}"

    def call(fn_name: str, fn: dict) -> str:
        if tag_problem(fn_name):
            raise _Unforceable("its name cannot be written in a tag")
        args = _text_call_params(g, fn, tag_problem, member)
        head = _lark_string(f"{fmt.FUNCTION}{fmt.tag_text(fn_name)}>\n")
        return " ".join(filter(None, [head, args, _lark_string(fmt.FUNCTION_END + "\n")]))

    branches = _tool_branches(_functions(tools, name), fmt.name, call)
    opening, closing = _lark_string(fmt.START + "\n"), _lark_string(fmt.END)
    if inline:
        calls = 'call ("\\n"? call)*' if parallel else "call"
        return _blocks_grammar("block", f"{opening} {calls} {closing}", branches, g)
    return _blocks_grammar(_one_or_more("block", parallel, "\n"), f"{opening} call {closing}", branches, g)


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
    start = "block (" + nl + " block)*" if parallel else "block"
    return _blocks_grammar(start, f"{_lark_string(glm4.START)} call {nl} {_lark_string(glm4.END)}", branches, g)
