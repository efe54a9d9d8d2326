"""Llama 3.1 / 3.2 / 3.3 JSON calls: ``{"name": ..., "parameters": {...}}``.

The whole output is the calls: it starts (after whitespace) with ``{`` or ``<|python_tag|>``
followed by call objects, several separated by ``;``. ``"arguments"`` is accepted in place of
``"parameters"``. To tell a call from a JSON answer, an object counts as a call only when it has
a ``name`` shaped like a function name (one of the request's tools when tools are given) and a
``parameters``/``arguments`` object; anything else is content, all of it. Text after the calls
is content.

Streaming: an output that starts with ``{`` is held until its first object proves to be a call
(name and arguments key seen, then arguments stream) or not (then it is released as content).
A later object after ``;`` that is malformed is released as content with the text after it.
"""

from __future__ import annotations

import re
from typing import ClassVar

from mlxctl.api.toolcalls.blocks import BlockParser
from mlxctl.api.toolcalls.jsonstream import CallObjectReader

PYTHON_TAG = "<|python_tag|>"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")


class Llama3JsonParser(BlockParser):
    name: ClassVar[str] = "llama3_json"
    _after_skip = "plain"

    def __init__(self, tools: list[dict] | None = None):
        super().__init__(tools)
        self._state = "start"  # start | object | sep | next | plain
        self._reader: CallObjectReader | None = None

    def _accept_name(self, name: str) -> bool:
        if self._functions:
            return name in self._functions
        return _NAME.fullmatch(name) is not None

    def _fail(self, final: bool) -> None:
        if self._reader is not None:
            self._raw.append("".join(self._reader.raw))
            self._reader = None
        super()._fail(final)

    def _start_object(self) -> None:
        self._reader = CallObjectReader(self, accept_name=self._accept_name, require_args=True)
        self._state = "object"

    def _process(self, final: bool) -> None:
        while True:
            state = self._state
            if state == "plain":
                self._emit_content(self._buf)
                self._buf = ""
                return
            if state == "start":
                tag = self._lead((PYTHON_TAG, "{"), final)
                if tag is False:
                    return
                if tag == PYTHON_TAG:
                    self._consume(len(PYTHON_TAG))
                    self._state = "next"
                elif tag == "{":
                    self._start_object()
                else:
                    self._fail(final)
            elif state == "next":
                tag = self._lead(("{",), final)
                if tag is False:
                    return
                if tag is None:
                    self._fail(final)
                else:
                    self._start_object()
            elif state == "object":
                reader = self._reader
                self._buf = self._buf[reader.feed(self._buf) :]
                if reader.status == "done":
                    self._reader, self._raw = None, []
                    self._state = "sep"
                elif reader.status == "error" or final:
                    self._fail(final)
                else:
                    return
            else:  # sep: after a call, ";" and another call, or the end
                tag = self._lead((";",), final)
                if tag is False:
                    return
                if tag == ";":
                    self._consume(1)
                    self._state = "next"
                else:
                    if self._buf:
                        self._emit_content("".join(self._raw))
                    self._raw = []
                    self._state = "plain"
