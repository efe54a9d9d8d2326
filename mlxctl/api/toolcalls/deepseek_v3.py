"""DeepSeek V3 / R1 and V3.1 calls (the markers use fullwidth bars ``｜`` and ``▁``).

V3 / R1::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
    ```json
    {"city": "Paris"}
    ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>

V3.1 (no type, no fence)::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>

The variant is told by what comes after ``<｜tool▁sep｜>``: ``function<｜tool▁sep｜>NAME`` then
a newline or fence is V3, otherwise the text before the separator is the name. Arguments stream
as they arrive. A call with bad JSON is released as content up to its ``<｜tool▁call▁end｜>``; a
complete call whose end markers never came (the output ended) is kept.
"""

from __future__ import annotations

from typing import ClassVar

from mlxctl.api.toolcalls.blocks import MAX_NAME
from mlxctl.api.toolcalls.kimi_k2 import SectionParser

CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
CALLS_END = "<｜tool▁calls▁end｜>"
CALL_BEGIN = "<｜tool▁call▁begin｜>"
CALL_END = "<｜tool▁call▁end｜>"
SEP = "<｜tool▁sep｜>"
FENCE = "```"


def _valid_name(name: str) -> bool:
    return bool(name) and not any(c.isspace() or c in "<>{}`" for c in name)


class DeepSeekV3Parser(SectionParser):
    name: ClassVar[str] = "deepseek_v3"
    _end = CALL_END
    _section_begins = (CALLS_BEGIN,)
    _section_ends = (CALLS_END,)
    _call_begin = CALL_BEGIN
    _call_state = "kind"

    def __init__(self, tools: list[dict] | None = None):
        super().__init__(tools)
        self._kind = ""  # the text before the separator
        self._fenced = False

    def _args_done(self) -> str:
        return "fence_close" if self._fenced else "call_end"

    def _call_step(self, state: str, final: bool) -> bool:
        if state == "kind":
            kind = self._until(SEP, final, limit=MAX_NAME)
            if kind is False:
                return False
            if kind is None:
                self._fail(final)
                return True
            self._kind = kind.strip()
            self._state = "after_sep"
        elif state == "after_sep":
            head = self._buf.lstrip()
            if not head and not final:
                return False
            if self._kind == "function" and head[:1] != "{":
                self._state = "v3_name"
            elif _valid_name(self._kind):
                self._fenced = False
                self._start_args(self._kind)
            else:
                self._fail(final)
        elif state == "v3_name":
            buf = self._buf
            ends = [i for i in (buf.find("\n", 0, MAX_NAME), buf.find("`", 0, MAX_NAME)) if i != -1]
            if not ends:
                if final or len(buf) >= MAX_NAME:
                    self._fail(final)
                    return True
                return False
            name = buf[: min(ends)].strip()
            if not _valid_name(name):
                self._fail(final)
                return True
            self._consume(min(ends))
            self._state = "fence_open"
            self._kind = name
        elif state == "fence_open":
            tag = self._lead((FENCE, "{"), final)
            if tag is False:
                return False
            if tag is None:
                self._fail(final)
                return True
            self._fenced = tag == FENCE
            if self._fenced:
                rest = self._buf[len(FENCE) :]
                # the fence's language tag (json) runs to the end of the line
                newline = rest.find("\n", 0, 32)
                if newline == -1:
                    if final or len(rest) >= 32:
                        self._fail(final)
                        return True
                    return False
                self._consume(len(FENCE) + newline + 1)
            self._start_args(self._kind)
        elif state == "fence_close":
            if self._expect((FENCE,), final) is False:
                return False
            self._state = "call_end"
        else:
            return super()._call_step(state, final)
        return True
