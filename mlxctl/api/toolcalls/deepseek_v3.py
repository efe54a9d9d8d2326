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

from mlxctl.api.toolcalls.blocks import MAX_NAME, BlockParser
from mlxctl.api.toolcalls.jsonstream import ArgsReader

CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
CALLS_END = "<｜tool▁calls▁end｜>"
CALL_BEGIN = "<｜tool▁call▁begin｜>"
CALL_END = "<｜tool▁call▁end｜>"
SEP = "<｜tool▁sep｜>"
FENCE = "```"


def _valid_name(name: str) -> bool:
    return bool(name) and not any(c.isspace() or c in "<>{}`" for c in name)


class DeepSeekV3Parser(BlockParser):
    name: ClassVar[str] = "deepseek_v3"
    _end = CALL_END
    _after_skip = "section"

    def __init__(self, tools: list[dict] | None = None):
        super().__init__(tools)
        self._reader: ArgsReader | None = None
        self._section_calls = 0  # calls completed in the current section
        self._kind = ""  # the text before the separator
        self._fenced = False

    def _fail(self, final: bool) -> None:
        if self._reader is not None:
            self._raw.append("".join(self._reader.raw))
            self._reader = None
        super()._fail(final)

    def _start_args(self, name: str) -> None:
        self._reader = ArgsReader(self, name)
        self._state = "args"

    def _process(self, final: bool) -> None:
        while True:
            state = self._state
            if state == "text":
                marker = self._scan((CALLS_BEGIN, CALL_BEGIN), final)
                if marker is None:
                    return
                self._raw = [marker]
                self._section_calls = 0
                self._state = "section" if marker == CALLS_BEGIN else "kind"
            elif state == "section":
                tag = self._expect((CALL_BEGIN, CALLS_END), final)
                if tag is False:
                    return
                if tag == CALL_BEGIN:
                    self._raw.append(tag)
                    self._state = "kind"
                else:  # the section ends (or breaks off); if it held no call, it is all content
                    if not self._section_calls:
                        self._emit_content("".join(self._raw) + (tag or ""))
                    self._raw = []
                    self._state = "text"
            elif state == "kind":
                kind = self._until(SEP, final, limit=MAX_NAME)
                if kind is False:
                    return
                if kind is None:
                    self._fail(final)
                    continue
                self._kind = kind.strip()
                self._state = "after_sep"
            elif state == "after_sep":
                head = self._buf.lstrip()
                if not head and not final:
                    return
                if self._kind == "function" and head[:1] != "{":
                    self._state = "v3_name"
                elif _valid_name(self._kind):
                    self._fenced = False
                    self._start_args(self._kind)
                else:
                    self._fail(final)
            elif state == "v3_name":
                buf = self._buf
                ends = [
                    i for i in (buf.find("\n", 0, MAX_NAME), buf.find("`", 0, MAX_NAME)) if i != -1
                ]
                if not ends:
                    if final or len(buf) >= MAX_NAME:
                        self._fail(final)
                        continue
                    return
                name = buf[: min(ends)].strip()
                if not _valid_name(name):
                    self._fail(final)
                    continue
                self._consume(min(ends))
                self._state = "fence_open"
                self._kind = name
            elif state == "fence_open":
                tag = self._lead((FENCE, "{"), final)
                if tag is False:
                    return
                if tag is None:
                    self._fail(final)
                    continue
                self._fenced = tag == FENCE
                if self._fenced:
                    rest = self._buf[len(FENCE) :]
                    # the fence's language tag (json) runs to the end of the line
                    newline = rest.find("\n", 0, 32)
                    if newline == -1:
                        if final or len(rest) >= 32:
                            self._fail(final)
                            continue
                        return
                    self._consume(len(FENCE) + newline + 1)
                self._start_args(self._kind)
            elif state == "args":
                reader = self._reader
                self._buf = self._buf[reader.feed(self._buf) :]
                if reader.status == "done":
                    self._reader, self._raw = None, []
                    self._section_calls += 1
                    self._state = "fence_close" if self._fenced else "call_end"
                elif reader.status == "error" or final:
                    self._fail(final)
                else:
                    return
            elif state == "fence_close":
                if self._expect((FENCE,), final) is False:
                    return
                self._state = "call_end"
            elif state == "call_end":
                if self._expect((CALL_END,), final) is False:
                    return
                self._state = "section"
            elif not self._skip(final):
                return
