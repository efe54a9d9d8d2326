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


class SectionParser(BlockParser):
    """A format whose calls sit in a section: ``SECTION_BEGIN (CALL_BEGIN head args CALL_END)*
    SECTION_END`` (a lone ``CALL_BEGIN`` opens a call outside a section too). Kimi K2, DeepSeek V3.

    The section states are shared: ``text`` (before a section), ``section`` (between calls),
    ``args`` (a call's JSON arguments, streamed as they arrive) and ``call_end``. A call begins in
    state ``_call_state``; the states from there to :meth:`_start_args` (the call's head) are the
    format's, read by :meth:`_call_step`. A section that held no call is all content.
    """

    _section_begins: ClassVar[tuple[str, ...]] = ()
    _section_ends: ClassVar[tuple[str, ...]] = ()
    _call_begin: ClassVar[str] = ""
    _call_state: ClassVar[str] = ""  # the state after a call's begin marker
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

    def _start_args(self, name: str) -> None:
        self._reader = ArgsReader(self, name)
        self._state = "args"

    def _args_done(self) -> str:
        """The state after a call's arguments."""
        return "call_end"

    def _call_step(self, state: str, final: bool) -> bool:
        """One step in the format's own states (and ``skip``); False to wait for more text."""
        return self._skip(final)

    def _process(self, final: bool) -> None:
        while True:
            state = self._state
            if state == "text":
                marker = self._scan((*self._section_begins, self._call_begin), final)
                if marker is None:
                    return
                self._state = "section" if marker in self._section_begins else self._call_state
                self._raw = [marker]
                self._section_calls = 0
            elif state == "section":
                tag = self._expect((self._call_begin, *self._section_ends), final)
                if tag is False:
                    return
                if tag == self._call_begin:
                    self._raw.append(tag)
                    self._state = self._call_state
                else:  # the section ends (or breaks off); if it held no call, it is all content
                    if not self._section_calls:
                        self._emit_content("".join(self._raw) + (tag or ""))
                    self._raw = []
                    self._state = "text"
            elif state == "args":
                reader = self._reader
                self._buf = self._buf[reader.feed(self._buf) :]
                if reader.status == "done":
                    self._reader, self._raw = None, []
                    self._section_calls += 1
                    self._state = self._args_done()
                elif reader.status == "error" or final:
                    self._fail(final)
                else:
                    return
            elif state == "call_end":
                if self._expect((self._end,), final) is False:
                    return
                self._state = "section"
            elif not self._call_step(state, final):
                return


class KimiK2Parser(SectionParser):
    name: ClassVar[str] = "kimi_k2"
    _end = CALL_END
    _section_begins = SECTION_BEGINS
    _section_ends = SECTION_ENDS
    _call_begin = CALL_BEGIN
    _call_state = "call_id"

    def _call_step(self, state: str, final: bool) -> bool:
        if state != "call_id":
            return super()._call_step(state, final)
        call_id = self._until(ARGS_BEGIN, final, limit=MAX_NAME)
        if call_id is False:
            return False
        name = None if call_id is None else _name(call_id)
        if name is None:
            self._fail(final)
        else:
            self._start_args(name)
        return True
