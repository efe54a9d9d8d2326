"""Markers that a tokenizer has as one added token, referred to by id in a Lark grammar.

The forcing grammars spell their markers as text (``"<tool_call>\\n"``). Where the tokenizer has
a marker as one added token (Qwen's ``<tool_call>`` is 151657, ``special: false``), the model
writes that token, and llguidance never matches an added token against text: its mask admits the
token and then ``consume_token`` rejects it. :func:`refer_by_id` rewrites the grammar for such a
tokenizer: every marker inside a string literal of a rule becomes ``<[id]>``, llguidance's
reference to one token. Grammars for tokenizers without such markers are left as they are.

Only string literals of rules (lower-case names) are rewritten: a terminal is matched on text and
cannot hold a token, and ``%json`` schemas and regexes are never touched.
"""

from __future__ import annotations

import json
import re
from typing import Any

_RULE_HEAD = re.compile(r"\s*([A-Za-z_]\w*)\s*(\[[^\]\n]*\])?\s*:")
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_REGEX = re.compile(r"/(?:[^/\\\n]|\\.)*/[imsx]*")


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
    return "\n".join(_rewrite_line(line, markers, found) for line in grammar.split("\n"))


def _rewrite_line(line: str, markers: dict[str, int], found: re.Pattern) -> str:
    head = _RULE_HEAD.match(line)
    if head is None or head.group(1).isupper() or line.lstrip().startswith("%"):
        return line  # a terminal, a directive, or a continuation: text only
    out, at = [line[: head.end()]], head.end()
    while at < len(line):
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
            literal = _split_literal(json.loads(literal), markers, found) or literal
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


def _split_literal(text: str, markers: dict[str, int], found: re.Pattern) -> str | None:
    """The Lark expression for the literal ``text`` with its markers as token references; None
    when it holds none."""
    pieces, at = [], 0
    for match in found.finditer(text):
        if match.start() > at:
            pieces.append(json.dumps(text[at: match.start()]))
        pieces.append(f"<[{markers[match.group(0)]}]>")
        at = match.end()
    if not at:
        return None
    if at < len(text):
        pieces.append(json.dumps(text[at:]))
    return pieces[0] if len(pieces) == 1 else f"({' '.join(pieces)})"
