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

    def _in_text(self, final: bool) -> bool:
        return self._block_start(MARKER, "start", final)

    def _in_start(self, final: bool) -> bool:
        tag = self._open_calls(final)
        if tag is None:
            self._state = "name"
        return tag is not False

    def _in_name(self, final: bool) -> bool:
        head = self._head(final)
        if head is False:
            return False
        if head is None:
            return self._give_up(final)
        name, tag = head
        if tag == CALL_ID:
            self._name = name
            self._state = "call_id"
        else:
            self._start_args(name)
        return True

    def _head(self, final: bool) -> tuple[str, str] | None | bool:
        """``NAME[ARGS]`` or ``NAME[CALL_ID]``, consumed: (NAME, tag); False to wait, None if bad."""
        end = self._name_end("[", final)
        if end is None or end is False:
            return end
        tag = self._head_tag(self._buf[end:], final)
        name = self._buf[:end].strip()
        if not tag or not name or any(c.isspace() or c in '{}[]"' for c in name):
            return tag if tag is False else None
        self._consume(end + len(tag))
        return name, tag

    @staticmethod
    def _head_tag(rest: str, final: bool) -> str | None | bool:
        """The tag after the name; False while ``rest`` may still become one, None if not."""
        tag = next((t for t in (ARGS, CALL_ID) if rest.startswith(t)), None)
        if tag is None and not final and any(t.startswith(rest) for t in (ARGS, CALL_ID)):
            return False
        return tag

    def _in_call_id(self, final: bool) -> bool:
        call_id = self._until(ARGS, final, limit=MAX_NAME)
        return self._then(call_id, final, lambda _: self._start_args(self._name))

    def _start_args(self, name: str) -> None:
        self._args = ArgsReader(self, name)
        self._state = "args"

    def _in_args(self, final: bool) -> bool:
        done = self._read_on(self._args, final)
        if done:
            self._args = None
            self._state = "text"
        return done is not False
