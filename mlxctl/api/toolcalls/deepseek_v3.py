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
        return self._step(final)  # the state's method, ``_in_<state>``

    def _in_kind(self, final: bool) -> bool:
        return self._then(self._until(SEP, final, limit=MAX_NAME), final, self._got_kind)

    def _got_kind(self, kind: str) -> None:
        self._kind = kind.strip()
        self._state = "after_sep"

    def _in_after_sep(self, final: bool) -> bool:
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
        return True

    def _in_v3_name(self, final: bool) -> bool:
        buf = self._buf
        ends = [i for i in (buf.find("\n", 0, MAX_NAME), buf.find("`", 0, MAX_NAME)) if i != -1]
        if not ends:
            return self._give_up(final) if final or len(buf) >= MAX_NAME else False
        name = buf[: min(ends)].strip()
        if not _valid_name(name):
            return self._give_up(final)
        self._consume(min(ends))
        self._state = "fence_open"
        self._kind = name
        return True

    def _in_fence_open(self, final: bool) -> bool:
        tag = self._lead((FENCE, "{"), final)
        if tag is False:
            return False
        if tag is None:
            return self._give_up(final)
        self._fenced = tag == FENCE
        line = self._fence_line(final) if self._fenced else 0
        if line is False:
            return False
        if line is None:
            return self._give_up(final)
        self._consume(line)
        self._start_args(self._kind)
        return True

    def _fence_line(self, final: bool) -> int | None | bool:
        """The length of the opening fence and its language tag (json) line, which runs to the
        end of the line; False to wait for more, None when the line is too long.
        """
        newline = self._buf.find("\n", len(FENCE), len(FENCE) + 32)
        if newline != -1:
            return newline + 1
        return None if final or len(self._buf) - len(FENCE) >= 32 else False

    def _in_fence_close(self, final: bool) -> bool:
        if self._expect((FENCE,), final) is False:
            return False
        self._state = "call_end"
        return True
