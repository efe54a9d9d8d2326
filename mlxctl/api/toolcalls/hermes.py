"""Hermes / Qwen2.5 / Qwen3: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.

Each call is a JSON object between ``<tool_call>`` and ``</tool_call>``; several calls are
several blocks, with any text around them being content. Arguments stream as they arrive, once
the name is complete. A block whose JSON is bad (or that is cut off by the end of the output) is
released as content, markers included; a complete call object whose ``</tool_call>`` never came
(the output ended) is accepted.

With tools given, a whole answer that is a bare JSON call (or list of calls) of offered tools,
without the tags, is read as those calls, as Qwen2.5 writes them (:mod:`~mlxctl.api.toolcalls.bare_json`);
an answer that starts with ``{`` or ``[`` is held back until that is decided.
"""

from __future__ import annotations

from typing import ClassVar

from mlxctl.api.toolcalls.bare_json import OPENERS, HeldAnswer, bare_calls
from mlxctl.api.toolcalls.base import ToolParser
from mlxctl.api.toolcalls.jsonstream import CallObjectReader

START = "<tool_call>"
END = "</tool_call>"


class HermesParser(ToolParser):
    name: ClassVar[str] = "hermes"

    def __init__(self, tools: list[dict] | None = None):
        super().__init__(tools)
        self._state = "start" if self._functions else "text"  # start | bare | text | call | close | skip
        self._reader: CallObjectReader | None = None
        self._held: HeldAnswer | None = None

    def _process(self, final: bool) -> None:
        while True:
            if self._state == "start":
                if not self._in_start(final):
                    return
            elif self._state == "bare":
                if not self._in_bare(final):
                    return
            elif self._state == "text":
                if self._scan((START,), final) is None:
                    return
                self._reader = CallObjectReader(self)
                self._state = "call"
            elif self._state == "call":
                reader = self._reader
                used = reader.feed(self._buf)
                self._buf = self._buf[used:]
                if reader.status == "done":
                    self._state = "close"
                elif reader.status == "error":
                    self._emit_content(START + "".join(reader.raw))
                    self._state = "skip"
                elif final:
                    self._emit_content(START + reader.abort() + self._buf)
                    self._buf = ""
                    return
                else:
                    return
            elif self._state == "close":
                if self._expect((END,), final) is False:
                    return
                self._state = "text"
            else:  # skip: the rest of a malformed block, up to and including its end marker
                marker = self._scan((END,), final)
                if marker is None:
                    return
                self._emit_content(marker)
                self._state = "text"

    def _in_start(self, final: bool) -> bool:
        """The answer's first text: hold it back when it may be a bare call; False to wait."""
        head = self._buf.lstrip()
        if not head and not final:
            return False
        if head.startswith(OPENERS):
            self._held = HeldAnswer()
            self._state = "bare"
        else:
            self._state = "text"
        return True

    def _in_bare(self, final: bool) -> bool:
        """A held answer: its calls once it ended as bare calls, else on as text; False to wait."""
        decided = self._held.add(self._buf)
        self._buf = ""
        calls = bare_calls(self._held.text, self.tools) if final and not decided else None
        if calls:
            for name, arguments in calls:
                self._emit_call(name, arguments)
            return False
        if decided or final:
            self._buf, self._state = self._held.text, "text"
            return True
        return False
