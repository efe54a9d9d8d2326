"""Kimi K2: a section of calls, each ``functions.NAME:IDX`` followed by a JSON arguments object.

::

    <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0
    <|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>

The name is the call id without its ``functions.`` prefix and ``:IDX`` suffix (the parser makes
its own ids). Arguments stream as they arrive. ``<|tool_call_section_begin|>`` (singular, seen in
some Kimi versions) is read too. A call with bad JSON is released as content up to its
``<|tool_call_end|>``; a complete call whose end markers never came (the output ended) is kept.
"""

from __future__ import annotations

import re
from typing import ClassVar

from mlxctl.api.toolcalls.blocks import MAX_NAME, BlockParser
from mlxctl.api.toolcalls.jsonstream import ArgsReader

SECTION_BEGINS = ("<|tool_calls_section_begin|>", "<|tool_call_section_begin|>")
SECTION_ENDS = ("<|tool_calls_section_end|>", "<|tool_call_section_end|>")
CALL_BEGIN = "<|tool_call_begin|>"
ARGS_BEGIN = "<|tool_call_argument_begin|>"
CALL_END = "<|tool_call_end|>"
_ID = re.compile(r"(?:functions\.)?(?P<name>.+?)(?::\d+)?")


def _name(call_id: str) -> str | None:
    match = _ID.fullmatch(call_id.strip())
    name = match.group("name") if match else ""
    return name if name and not any(c.isspace() for c in name) else None


class KimiK2Parser(BlockParser):
    name: ClassVar[str] = "kimi_k2"
    _end = CALL_END
    _after_skip = "section"

    def __init__(self, tools: list[dict] | None = None):
        super().__init__(tools)
        self._reader: ArgsReader | None = None
        self._section_calls = 0  # calls completed in the current section

    def _fail(self, final: bool) -> None:
        if self._reader is not None:
            self._raw.append("".join(self._reader.raw))
            self._reader = None
        super()._fail(final)

    def _process(self, final: bool) -> None:
        while True:
            state = self._state
            if state == "text":
                marker = self._scan((*SECTION_BEGINS, CALL_BEGIN), final)
                if marker is None:
                    return
                self._state = "section" if marker in SECTION_BEGINS else "call_id"
                self._raw = [marker]
                self._section_calls = 0
            elif state == "section":
                tag = self._expect((CALL_BEGIN, *SECTION_ENDS), final)
                if tag is False:
                    return
                if tag == CALL_BEGIN:
                    self._raw.append(tag)
                    self._state = "call_id"
                else:  # the section ends (or breaks off); if it held no call, it is all content
                    if not self._section_calls:
                        self._emit_content("".join(self._raw) + (tag or ""))
                    self._raw = []
                    self._state = "text"
            elif state == "call_id":
                call_id = self._until(ARGS_BEGIN, final, limit=MAX_NAME)
                if call_id is False:
                    return
                name = None if call_id is None else _name(call_id)
                if name is None:
                    self._fail(final)
                    continue
                self._reader = ArgsReader(self, name)
                self._state = "args"
            elif state == "args":
                reader = self._reader
                self._buf = self._buf[reader.feed(self._buf) :]
                if reader.status == "done":
                    self._reader, self._raw = None, []
                    self._section_calls += 1
                    self._state = "call_end"
                elif reader.status == "error" or final:
                    self._fail(final)
                else:
                    return
            elif state == "call_end":
                if self._expect((CALL_END,), final) is False:
                    return
                self._state = "section"
            elif not self._skip(final):
                return
