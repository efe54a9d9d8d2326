"""Lark text shared by every forcing grammar: the allowed tools, literals, repetitions, ``%json``
with bounded whitespace, string lexemes, and a builder of rules with fresh names."""

from __future__ import annotations

import json
from typing import Any

from mlxctl.api.toolcalls.base import tool_functions
from mlxctl.engine.constraints import JSON_WHITESPACE
from mlxctl.errors import BadInputError

# what Python's str.strip() strips, as a Rust regex class (Unicode White_Space and \\x1c-\\x1f)
_PY_SPACE = (r"[\t\n\x0B\x0C\r\x1C-\x1F \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}"
             r"\x{205F}\x{3000}]")


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


def _lark_string(text: str) -> str:
    return json.dumps(text)


def _one_or_more(rule: str, parallel: bool, separator: str | None = None) -> str:
    """``rule``, or with ``parallel`` one or more of it (``separator`` text between them)."""
    if not parallel:
        return rule
    sep = "" if separator is None else _lark_string(separator) + " "
    return f"{rule} ({sep}{rule})*"


def _alternatives(exprs: list[str]) -> str:
    return exprs[0] if len(exprs) == 1 else f"({' | '.join(exprs)})"


def _json_expr(schema: Any) -> str:
    """``%json`` of a (whole) schema, with the bounded whitespace of every forcing grammar."""
    if schema is True:
        schema = {}
    guidance = {"whitespace_flexible": True, "whitespace_pattern": JSON_WHITESPACE}
    return f"%json {json.dumps({**schema, 'x-guidance': guidance}, ensure_ascii=False)}"


def _rx(text: str) -> str:
    """``text`` as a Rust regex matching it literally (other than letters and digits, hex escapes)."""
    return "".join(c if c.isascii() and c.isalnum() else f"\\x{{{ord(c):X}}}" for c in text)


def _string_lexeme(min_len: int, max_len: int | None, stops: tuple[str, ...], not_null: bool = False,
                   inline: bool = False) -> str:
    """A lexeme expression: text of ``min_len`` to ``max_len`` characters containing none of
    ``stops`` (and, with ``not_null``, not ``null``/``none`` in any case, blank around; with
    ``inline``, neither starting nor ending with a newline, which a parser reads as layout)."""
    # a negation needs a positive part beside it: alone in a concatenation, llguidance reads it wrong
    parts = [f"/(?s:.){{{min_len},{'' if max_len is None else max_len}}}/"]
    if stops:
        parts.append(f"~/(?s:.*)({'|'.join(_rx(s) for s in stops)})(?s:.*)/")
    if not_null:
        parts.append(f"~/{_PY_SPACE}*(?i:null|none){_PY_SPACE}*/")
    if inline:
        parts.append(r"~/\n(?s:.*)|(?s:.*)\n/")
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
