"""Incremental JSON reading for tool-call formats whose arguments are JSON objects.

:class:`JsonScanner` checks one JSON object character by character, so a parser can stream the
arguments' text while it arrives and notice bad JSON at the character that breaks it. It keeps
the text as the model wrote it, except that raw control characters inside strings (which strict
JSON forbids, and which models do emit, e.g. newlines in code) are written as escapes, so the
streamed text is always a prefix of valid JSON.

:class:`ArgsReader` streams a bare arguments object (``{"city": "Paris"}``) of a named call;
:class:`CallObjectReader` reads a call object (``{"name": ..., "arguments": {...}}``) and streams
its arguments once the name is known.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mlxctl.api.toolcalls.base import ToolParser, _Call

_WS = frozenset(" \t\n\r")
_NUMBER = frozenset("0123456789+-.eE")
_HEX = frozenset("0123456789abcdefABCDEF")
_ESCAPES = frozenset('"\\/bfnrtu')
_CONTROL = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
_LITERALS = {"t": "rue", "f": "alse", "n": "ull"}


class JsonScanner:
    """Validates one JSON object incrementally and tracks its top-level members.

    :meth:`step` takes one character and returns its normalized text ('' for whitespace before
    the object), or None when the character cannot continue valid JSON. After each step,
    :attr:`in_member` tells whether the character belongs to the value of a top-level member,
    :attr:`key` is that member's key and :attr:`ended_key` is set to the key when its value
    just ended. :attr:`state` is ``"done"`` once the object is closed. Numbers are checked
    loosely (a final ``json.loads`` is the judge).
    """

    __slots__ = (
        "ended_key",
        "esc",
        "in_key",
        "in_member",
        "key",
        "key_raw",
        "lit",
        "member_open",
        "stack",
        "state",
    )

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.state = "value"  # value | value_or_close | key | key_or_close | colon | after |
        #                       string | number | literal | done | error
        self.in_key = False
        self.esc = 0  # 1 after a backslash, 2..5 inside the hex digits of \uXXXX
        self.lit = ""
        self.key_raw: list[str] = []
        self.key: str | None = None
        self.member_open = False
        self.in_member = False
        self.ended_key: str | None = None

    def step(self, ch: str) -> str | None:
        self.ended_key = None
        state = self.state
        if state == "string":
            return self._string(ch)
        if state == "number":
            if ch in _NUMBER:
                self.in_member = self.member_open
                return ch
            self._value_done()
            state = self.state
        if state == "literal":
            if not self.lit or ch != self.lit[0]:
                return self._fail()
            self.lit = self.lit[1:]
            self.in_member = self.member_open
            if not self.lit:
                self._value_done()
            return ch
        if state in ("done", "error"):
            return self._fail()
        if ch in _WS:
            self.in_member = self.member_open
            return ch if self.stack else ""
        if state == "value_or_close" and ch == "]":
            return self._close(ch)
        if state in ("value", "value_or_close"):
            return self._begin_value(ch)
        if state in ("key", "key_or_close"):
            if ch == '"':
                self.state, self.in_key, self.in_member = "string", True, self.member_open
                self.key_raw = []
                return ch
            if ch == "}" and state == "key_or_close":
                return self._close(ch)
            return self._fail()
        if state == "colon":
            if ch != ":":
                return self._fail()
            self.state, self.in_member = "value", self.member_open
            return ch
        # state == "after": a value just ended inside a container
        if ch == ",":
            self.state = "key" if self.stack[-1] == "{" else "value"
            self.in_member = self.member_open
            return ch
        if ch in "}]":
            return self._close(ch)
        return self._fail()

    def _fail(self) -> None:
        self.state = "error"

    def _begin_value(self, ch: str) -> str | None:
        depth = len(self.stack)
        if depth == 0 and ch != "{":
            return self._fail()
        if depth == 1 and self.stack[0] == "{":
            self.member_open = True
        if ch in "{[":
            self.stack.append(ch)
            self.state = "key_or_close" if ch == "{" else "value_or_close"
        elif ch == '"':
            self.state, self.in_key = "string", False
        elif ch in "-0123456789":
            self.state = "number"
        elif ch in _LITERALS:
            self.state, self.lit = "literal", _LITERALS[ch]
        else:
            return self._fail()
        self.in_member = self.member_open
        return ch

    def _close(self, ch: str) -> str | None:
        want = "{" if ch == "}" else "["
        if not self.stack or self.stack[-1] != want:
            return self._fail()
        self.stack.pop()
        self.in_member = self.member_open
        self._value_done()
        return ch

    def _value_done(self) -> None:
        depth = len(self.stack)
        if depth == 0:
            self.state = "done"
            return
        self.state = "after"
        if depth == 1 and self.member_open:
            self.member_open = False
            self.ended_key = self.key

    def _string(self, ch: str) -> str | None:
        out = ch
        if self.esc == 1:
            if ch not in _ESCAPES:
                return self._fail()
            self.esc = 2 if ch == "u" else 0
        elif self.esc:
            if ch not in _HEX:
                return self._fail()
            self.esc = self.esc + 1 if self.esc < 5 else 0
        elif ch == "\\":
            self.esc = 1
        elif ch == '"':
            if self.in_key:
                if len(self.stack) == 1:
                    self.key = json.loads('"' + "".join(self.key_raw) + '"')
                self.state, self.in_member = "colon", self.member_open
                return ch
            self.in_member = self.member_open
            self._value_done()
            return ch
        elif ch < " ":
            out = _CONTROL.get(ch) or f"\\u{ord(ch):04x}"
        if self.in_key:
            if len(self.stack) == 1:
                self.key_raw.append(out)
            self.in_member = self.member_open
        else:
            self.in_member = self.member_open
        return out


class ArgsReader:
    """Streams one arguments object of a call named ``name`` into ``parser``.

    The call is announced at the object's first character. :meth:`feed` consumes text up to the
    end of the object and returns how much it took; :attr:`status` becomes ``"done"`` (call
    closed) or ``"error"`` (call dropped; :attr:`raw` holds the text read, for the caller to
    release as content).
    """

    def __init__(self, parser: ToolParser, name: str):
        self.parser = parser
        self.name = name
        self.scanner = JsonScanner()
        self.raw: list[str] = []
        self.text: list[str] = []
        self.sent = 0
        self.call: _Call | None = None
        self.status = "reading"

    def feed(self, text: str) -> int:
        scanner, raw, out_text = self.scanner, self.raw, self.text
        for i, ch in enumerate(text):
            out = scanner.step(ch)
            raw.append(ch)
            if out is None:
                self.status = "error"
                self.parser._drop_call(self.call)
                return i + 1
            if out:
                out_text.append(out)
            if scanner.state == "done":
                self._flush()
                try:
                    json.loads("".join(out_text))
                except ValueError:
                    self.status = "error"
                    self.parser._drop_call(self.call)
                    return i + 1
                self.status = "done" if self.parser._close_call(self.call) else "error"
                return i + 1
        self._flush()
        return len(text)

    def _flush(self) -> None:
        if not self.text:
            return
        if self.call is None:
            self.call = self.parser._open_call(self.name)
        if len(self.text) > self.sent:
            self.parser._emit_args(self.call, "".join(self.text[self.sent :]))
            self.sent = len(self.text)

    def abort(self) -> str:
        """The output ended inside the object: drop the call, return the raw text read."""
        self.parser._drop_call(self.call)
        self.status = "error"
        return "".join(self.raw)


class CallObjectReader:
    """Reads ``{"name": ..., "arguments": {...}}`` (or ``"parameters"``) and streams the call.

    The call is announced once its name is complete (and accepted by ``accept_name``) and its
    arguments object has begun, whatever the key order; arguments given as a JSON string that
    holds an object, or null, are accepted and sent whole at the end. ``require_args`` refuses
    an object without an arguments key.
    """

    def __init__(
        self,
        parser: ToolParser,
        *,
        arg_keys: tuple[str, ...] = ("arguments", "parameters"),
        accept_name: Callable[[str], bool] | None = None,
        require_args: bool = False,
    ):
        self.parser = parser
        self.arg_keys = arg_keys
        self.accept_name = accept_name or (lambda name: True)
        self.require_args = require_args
        self.scanner = JsonScanner()
        self.raw: list[str] = []
        self.text: list[str] = []
        self.name_text: list[str] = []
        self.name: str | None = None
        self.name_done = False
        self.args_key: str | None = None
        self.args: list[str] = []
        self.args_done = False
        self.sent = 0
        self.call: _Call | None = None
        self.status = "reading"

    def feed(self, text: str) -> int:
        scanner = self.scanner
        for i, ch in enumerate(text):
            out = scanner.step(ch)
            self.raw.append(ch)
            if out is None:
                self._fail()
                return i + 1
            self.text.append(out)
            if scanner.in_member:
                key = scanner.key
                if key == "name" and not self.name_done:
                    self.name_text.append(out)
                elif key in self.arg_keys and not self.args_done and self.args_key in (None, key):
                    self.args_key = key
                    self.args.append(out)
            ended = scanner.ended_key
            if ended is not None:
                if ended == "name" and not self.name_done:
                    self.name_done = True
                    value = json.loads("".join(self.name_text)) if self.name_text else None
                    self.name = value if isinstance(value, str) else None
                elif ended == self.args_key:
                    self.args_done = True
            if scanner.state == "done":
                self._complete()
                return i + 1
        self._stream()
        return len(text)

    def _streamable(self) -> bool:
        return bool(self.args) and self.args[0] == "{"

    def _stream(self) -> None:
        if self.call is None:
            if self.name is None or not self._streamable() or not self.accept_name(self.name):
                return
            self.call = self.parser._open_call(self.name)
        if self._streamable() and len(self.args) > self.sent:
            self.parser._emit_args(self.call, "".join(self.args[self.sent :]))
            self.sent = len(self.args)

    def _fail(self) -> None:
        self.status = "error"
        self.parser._drop_call(self.call)

    def _complete(self) -> None:
        try:
            obj = json.loads("".join(self.text))
        except ValueError:
            return self._fail()
        name = obj.get("name")
        if not isinstance(name, str) or not name or not self.accept_name(name):
            return self._fail()
        if self.args_key is None:
            if self.require_args:
                return self._fail()
            whole = "{}"
        elif self._streamable():
            whole = None
        else:
            value = json.loads("".join(self.args))
            if value is None:
                whole = "{}"
            elif isinstance(value, str):
                try:
                    decoded = json.loads(value)
                except ValueError:
                    return self._fail()
                if not isinstance(decoded, dict):
                    return self._fail()
                whole = json.dumps(decoded, ensure_ascii=False)
            else:
                return self._fail()
        self.name = name
        if self.call is None:
            self.call = self.parser._open_call(name)
        if whole is None:
            self._stream()
        else:
            self.parser._emit_args(self.call, whole)
        self.status = "done" if self.parser._close_call(self.call) else "error"

    def abort(self) -> str:
        """The output ended inside the object: drop the call, return the raw text read."""
        self._fail()
        return "".join(self.raw)
