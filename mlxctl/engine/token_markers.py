"""Markers that a tokenizer has as one added token, referred to by id in a Lark grammar.

The forcing grammars spell their markers as text (``"<tool_call>\\n"``). Where the tokenizer has
a marker as one added token (Qwen's ``<tool_call>`` is 151657, ``special: false``), the model
writes that token, and llguidance never matches an added token against text: its mask admits the
token and then ``consume_token`` rejects it. :func:`refer_by_id` rewrites the grammar for such a
tokenizer: every marker inside a string literal of a rule becomes ``<[id]>``, llguidance's
reference to one token. Grammars for tokenizers without such markers are left as they are.

A terminal is matched on text and cannot hold a token: one that opens or closes with a marker
(GLM's value ``T: (text) "</arg_value>"``) loses that literal, and a rule that puts the token
references around it takes its place where it is used. ``%json`` schemas and regexes are never
touched.
"""

from __future__ import annotations

import json
import re
from typing import Any

_RULE_HEAD = re.compile(r"\s*([A-Za-z_]\w*)\s*(\[[^\]\n]*\])?\s*:")
_REGEX = re.compile(r"/(?:[^/\\\n]|\\.)*/[imsx]*")
_NAME = re.compile(r"(?<![\w%])[A-Za-z_]\w*")
_LITERAL = r'"(?:[^"\\\n]|\\.)*"'
_STRING = re.compile(_LITERAL)
_TERMINAL_BODY = re.compile(rf"\s*({_LITERAL})?\s*(\(.*\))\s*({_LITERAL})?\s*")


def marker_tokens(hf_tokenizer: Any) -> dict[str, int]:
    """The tokenizer's added tokens that can be markers (no whitespace, not a plain word, at
    least two characters) and that it encodes as exactly themselves, text -> id."""
    get_added = getattr(hf_tokenizer, "get_added_vocab", None)
    if get_added is None:
        return {}
    markers = {}
    for text, token_id in get_added().items():
        if len(text) < 2 or text.isalnum() or any(c.isspace() for c in text):
            continue
        if hf_tokenizer.encode(text, add_special_tokens=False) == [token_id]:
            markers[text] = token_id
    return markers


def refer_by_id(grammar: str, markers: dict[str, int]) -> str:
    """``grammar`` (Lark text) with every marker of ``markers`` that a rule's string literal
    contains written as its token reference ``<[id]>``."""
    if not markers:
        return grammar
    found = re.compile("|".join(re.escape(m) for m in sorted(markers, key=len, reverse=True)))
    lines, renames, added = _split_terminals(grammar.split("\n"), markers, found)
    return "\n".join([_rewrite_line(line, markers, found, renames) for line in lines] + added)


def _split_terminals(lines: list[str], markers: dict[str, int],
                     found: re.Pattern) -> tuple[list[str], dict[str, str], list[str]]:
    """The lines with the terminals that open or close with a marker written without it, the
    names of the rules that take their places, and those rules (the token references around them)."""
    out, renames, added = [], {}, []
    for line in lines:
        head = _RULE_HEAD.match(line)
        parts = _TERMINAL_BODY.fullmatch(line[head.end():]) if head and head.group(1).isupper() else None
        first, core, last = parts.groups() if parts else (None, "", None)
        opens = first and _split_literal(_text_of(first), markers, found, where="start")
        closes = last and _split_literal(_text_of(last), markers, found, where="end")
        if not _one_group(core) or not (opens or closes):
            out.append(line)
            continue
        name = head.group(1)
        renames[name] = f"{name.lower()}_tokens"
        pieces = [opens or first or "", name, closes or last or ""]
        out.append(f"{line[:head.end()]} {core}")
        added.append(f"{renames[name]}: {' '.join(p for p in pieces if p)}")
    return out, renames, added


def _one_group(expr: str) -> bool:
    """Whether ``expr`` is one parenthesized group (its first parenthesis closes at its end)."""
    flat, depth = _STRING.sub('""', _REGEX.sub("//", expr)), 0
    for i, c in enumerate(flat):
        depth += {"(": 1, ")": -1}.get(c, 0)
        if depth == 0:
            return i == len(flat) - 1
    return False


def _rewrite_line(line: str, markers: dict[str, int], found: re.Pattern, renames: dict[str, str]) -> str:
    head = _RULE_HEAD.match(line)
    if head is None or head.group(1).isupper() or line.lstrip().startswith("%"):
        return line  # a terminal, a directive, or a continuation: text only
    out, at = [line[: head.end()]], head.end()
    while at < len(line):
        name = _NAME.match(line, at)
        if name is not None:
            out.append(renames.get(name.group(0), name.group(0)))
            at = name.end()
            continue
        if line.startswith("%json", at):
            end = _json_end(line, at + len("%json"))
            out.append(line[at:end])
            at = end
            continue
        match = _REGEX.match(line, at) if line[at] == "/" else _STRING.match(line, at) if line[at] == '"' else None
        if match is None:
            out.append(line[at])
            at += 1
            continue
        literal = match.group(0)
        if literal.startswith('"') and not _in_lexeme_expression(line, match.start(), match.end()):
            literal = _split_literal(_text_of(literal), markers, found) or literal
        out.append(literal)
        at = match.end()
    return "".join(out)


def _json_end(line: str, at: int) -> int:
    """Where the JSON value after ``%json`` (from ``at``) ends."""
    start = len(line) - len(line[at:].lstrip())
    try:
        _, end = json.JSONDecoder().raw_decode(line, start)
    except ValueError:
        return len(line)
    return end


def _in_lexeme_expression(line: str, start: int, end: int) -> bool:
    """Whether the literal is an operand of ``~`` or ``&`` (which work on text only)."""
    before, after = line[:start].rstrip(), line[end:].lstrip()
    return before.endswith(("~", "&")) or after.startswith("&")


def _text_of(literal: str) -> str:
    """The text of a Lark string literal ('' for one this module does not read: left as it is)."""
    try:
        return json.loads(literal)
    except ValueError:
        return ""


def _split_literal(text: str, markers: dict[str, int], found: re.Pattern, where: str = "") -> str | None:
    """The Lark expression for the literal ``text`` with its markers as token references; None
    when it holds none (with ``where`` "start" or "end": none there)."""
    pieces, at = [], 0
    matches = list(found.finditer(text))
    if where == "start" and not (matches and matches[0].start() == 0):
        return None
    if where == "end" and not (matches and matches[-1].end() == len(text)):
        return None
    for match in matches:
        if match.start() > at:
            pieces.append(json.dumps(text[at: match.start()]))
        pieces.append(f"<[{markers[match.group(0)]}]>")
        at = match.end()
    if not at:
        return None
    if at < len(text):
        pieces.append(json.dumps(text[at:]))
    return pieces[0] if len(pieces) == 1 else f"({' '.join(pieces)})"
