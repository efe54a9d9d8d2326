"""Mistral: ``[TOOL_CALLS]`` followed by the calls, in either of Mistral's two layouts.

Older models (tokenizer v3-v7, e.g. Mistral 7B v0.3, Nemo, Small 3.1)::

    [TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, {...}]

Newer models (tokenizer v11+, e.g. Small 3.2, Magistral, Devstral), one marker per call::

    [TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{}

(``NAME[CALL_ID]id[ARGS]{...}`` is read too; the id is replaced by the parser's own.) A single
call object without the array is accepted. Arguments stream as they arrive. Text after the calls
is content. A malformed call is released as content, with the text after it.
"""

from __future__ import annotations

from typing import ClassVar

from mlxctl.api.toolcalls.blocks import MAX_NAME, CallArrayParser
from mlxctl.api.toolcalls.jsonstream import ArgsReader

MARKER = "[TOOL_CALLS]"
ARGS = "[ARGS]"
CALL_ID = "[CALL_ID]"


class MistralParser(CallArrayParser):
    name: ClassVar[str] = "mistral"

    def __init__(self, tools: list[dict] | None = None):
        super().__init__(tools)
        self._args: ArgsReader | None = None
        self._name = ""

    def _fail(self, final: bool) -> None:
        if self._args is not None:
            self._raw.append("".join(self._args.raw))
            self._args = None
        super()._fail(final)

    def _process(self, final: bool) -> None:
        while True:
            state = self._state
            if state == "text":
                if self._scan((MARKER,), final) is None:
                    return
                self._raw = [MARKER]
                self._state = "start"
            elif state == "start":
                tag = self._lead(("[", "{"), final)
                if tag is False:
                    return
                if tag == "[":
                    self._consume(1)
                    self._state = "array"
                elif tag == "{":
                    self._start_object("text")
                else:
                    self._state = "name"
            elif state == "name":
                buf = self._buf
                end = buf.find("[", 0, MAX_NAME + 1)
                if end == -1:
                    if final or len(buf) > MAX_NAME:
                        self._fail(final)
                        continue
                    return
                rest = buf[end:]
                tag = next((t for t in (ARGS, CALL_ID) if rest.startswith(t)), None)
                if tag is None:
                    if not final and any(t.startswith(rest) for t in (ARGS, CALL_ID)):
                        return
                    self._fail(final)
                    continue
                name = buf[:end].strip()
                if not name or any(c.isspace() or c in '{}[]"' for c in name):
                    self._fail(final)
                    continue
                self._consume(end + len(tag))
                if tag == CALL_ID:
                    self._name = name
                    self._state = "call_id"
                else:
                    self._args = ArgsReader(self, name)
                    self._state = "args"
            elif state == "call_id":
                call_id = self._until(ARGS, final, limit=MAX_NAME)
                if call_id is False:
                    return
                if call_id is None:
                    self._fail(final)
                    continue
                self._args = ArgsReader(self, self._name)
                self._state = "args"
            elif state == "args":
                reader = self._args
                self._buf = self._buf[reader.feed(self._buf) :]
                if reader.status == "done":
                    self._args, self._raw = None, []
                    self._state = "text"
                elif reader.status == "error" or final:
                    self._fail(final)
                else:
                    return
            elif not self._array_step(final):
                return
