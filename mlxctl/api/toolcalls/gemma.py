"""Gemma 4 calls (and FunctionGemma's, the same syntax with other markers).

Gemma 4::

    <|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3,units:[<|"|>c<|"|>]}<tool_call|>

FunctionGemma (Gemma 3 270M)::

    <start_function_call>call:get_weather{city:<escape>Paris<escape>}<end_function_call>

Arguments are not JSON: keys are bare, strings are delimited by ``<|"|>`` (``<escape>``), numbers,
``true``/``false``/``null`` are bare, objects are ``{k:v,...}`` and arrays ``[v,...]``; they are
converted to a JSON object. Several calls are several blocks (``call:...`` repeated inside one
block is read too). A block is converted when it closes, so each call's arguments are sent in one
fragment. A block that does not convert is released as content; one whose closing marker never
came (the output ended) is kept if its text converts. Plain Gemma 3 has no call syntax of its own
(its guide prompts for Python-style lists: use ``pythonic``).
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

from mlxctl.api.toolcalls.blocks import BlockParser

# start marker -> (end marker, string delimiter)
MARKERS = {
    "<|tool_call>": ("<tool_call|>", '<|"|>'),
    "<start_function_call>": ("<end_function_call>", "<escape>"),
}
_CALL = re.compile(r"\s*call:([\w.\-]+)\s*(?=\{)")
_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?")
_BARE = {"true": True, "false": False, "null": None, "none": None}


class _Bad(Exception):
    pass


class _Reader:
    """A recursive-descent reader of Gemma's argument syntax."""

    def __init__(self, text: str, quote: str):
        self.text, self.quote, self.i = text, quote, 0

    def ws(self) -> None:
        while self.i < len(self.text) and self.text[self.i].isspace():
            self.i += 1

    def expect(self, ch: str) -> None:
        self.ws()
        if not self.text.startswith(ch, self.i):
            raise _Bad
        self.i += len(ch)

    def string(self) -> str:
        self.i += len(self.quote)
        end = self.text.find(self.quote, self.i)
        if end == -1:
            raise _Bad
        value, self.i = self.text[self.i : end], end + len(self.quote)
        return value

    def obj(self) -> dict[str, Any]:
        self.expect("{")
        out: dict[str, Any] = {}
        self.ws()
        if self.text.startswith("}", self.i):
            self.i += 1
            return out
        while True:
            self.ws()
            if self.text.startswith(self.quote, self.i):
                key = self.string()
            else:
                end = self.text.find(":", self.i)
                key = self.text[self.i : end].strip() if end != -1 else ""
                if not key or any(c in key for c in "{}[],<>\"'") or any(c.isspace() for c in key):
                    raise _Bad
                self.i = end
            self.expect(":")
            out[key] = self.value()
            self.ws()
            if self.text.startswith(",", self.i):
                self.i += 1
            elif self.text.startswith("}", self.i):
                self.i += 1
                return out
            else:
                raise _Bad

    def array(self) -> list[Any]:
        self.expect("[")
        out: list[Any] = []
        self.ws()
        if self.text.startswith("]", self.i):
            self.i += 1
            return out
        while True:
            out.append(self.value())
            self.ws()
            if self.text.startswith(",", self.i):
                self.i += 1
            elif self.text.startswith("]", self.i):
                self.i += 1
                return out
            else:
                raise _Bad

    def value(self) -> Any:
        self.ws()
        text, i = self.text, self.i
        if text.startswith(self.quote, i):
            return self.string()
        if text.startswith("{", i):
            return self.obj()
        if text.startswith("[", i):
            return self.array()
        end = i
        while end < len(text) and text[end] not in ",}]":
            end += 1
        bare = text[i:end].strip()
        if not bare or self.quote in bare:
            raise _Bad
        self.i = end
        if bare.lower() in _BARE:
            return _BARE[bare.lower()]
        if _NUMBER.fullmatch(bare):
            number = json.loads(bare)
            return number
        return bare


def parse_block(body: str, quote: str) -> list[tuple[str, dict[str, Any]]] | None:
    """The calls in one block's text (``call:NAME{...}`` repeated), or None if malformed."""
    calls = []
    pos = 0
    while pos < len(body):
        if not body[pos:].strip():
            break
        match = _CALL.match(body, pos)
        if not match:
            return None
        reader = _Reader(body, quote)
        reader.i = match.end()
        try:
            arguments = reader.obj()
        except (_Bad, RecursionError):
            return None
        calls.append((match.group(1), arguments))
        pos = reader.i
    return calls or None


class GemmaParser(BlockParser):
    name: ClassVar[str] = "gemma"

    def __init__(self, tools: list[dict] | None = None):
        super().__init__(tools)
        self._quote = ""

    def _process(self, final: bool) -> None:
        while True:
            if self._state == "text":
                marker = self._scan(tuple(MARKERS), final)
                if marker is None:
                    return
                self._end, self._quote = MARKERS[marker]
                self._raw = [marker]
                self._state = "body"
            elif self._state == "body":
                body = self._until(self._end, final, limit=None)
                if body is False:
                    return
                if body is None:  # the output ended inside the block: keep it if it converts
                    body = self._buf
                    self._consume(len(body))
                calls = parse_block(body, self._quote)
                if calls is None or self._rejects_any(calls):
                    self._fail(final)
                    continue
                for name, arguments in calls:
                    self._emit_call(name, arguments)
                self._raw = []
                self._state = "text"
            elif not self._skip(final):
                return
