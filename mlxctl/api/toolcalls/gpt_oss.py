"""GPT-OSS Harmony: messages on channels; a call is a message addressed ``to=functions.NAME``.

::

    <|channel|>analysis<|message|>The user wants the weather.<|end|>
    <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json
    <|message|>{"city": "Paris"}<|call|>

    <|channel|>final<|message|>It is sunny.<|return|>

(the call's header is one line, broken here to fit). Each message has a header
(``<|start|>ROLE``, ``<|channel|>NAME``, optionally ``to=RECIPIENT`` and ``<|constrain|>json``,
in any order) and a body after ``<|message|>`` that ends at
``<|end|>``, ``<|call|>`` or ``<|return|>`` (or the next header). A message with a recipient is a
call, its body the JSON arguments, streamed as they arrive (``functions.`` is removed from the
name; other recipients keep their full name). The ``analysis`` channel is reasoning, dropped here
(a reasoning parser shows it); ``final`` and recipient-less ``commentary`` (preambles) are
content. Text outside any message is content. A call whose body is not a JSON object is released
as content, header included; a complete call whose ``<|call|>`` never came (it is a stop token,
often not in the decoded text) is kept.
"""

from __future__ import annotations

import re
from typing import ClassVar

from mlxctl.api.toolcalls.base import ToolParser
from mlxctl.api.toolcalls.jsonstream import ArgsReader

START = "<|start|>"
CHANNEL = "<|channel|>"
MESSAGE = "<|message|>"
ENDS = ("<|end|>", "<|call|>", "<|return|>")
HEADERS = (START, CHANNEL)
_MAX_HEADER = 512
_RECIPIENT = re.compile(r"to=([^\s<]+)")
_CHANNEL = re.compile(r"<\|channel\|>\s*([^\s<]+)")


class GptOssParser(ToolParser):
    name: ClassVar[str] = "gpt_oss"

    def __init__(self, tools: list[dict] | None = None):
        super().__init__(tools)
        self._state = "outside"  # outside | header | content | drop | call | call_end | skip
        self._header = ""
        self._reader: ArgsReader | None = None

    def _process(self, final: bool) -> None:
        while True:
            state = self._state
            if state == "outside":
                marker = self._scan(HEADERS, final)
                if marker is None:
                    return
                self._header, self._state = marker, "header"
            elif state == "header":
                pos = self._buf.find(MESSAGE, 0, _MAX_HEADER + len(MESSAGE))
                if pos == -1:
                    if final or len(self._buf) >= _MAX_HEADER + len(MESSAGE):
                        self._emit_content(self._header)  # not a header after all
                        self._state = "outside"
                        continue
                    return
                self._header += self._buf[: pos + len(MESSAGE)]
                self._buf = self._buf[pos + len(MESSAGE) :]
                self._open_message()
            elif state in ("content", "drop"):
                marker = self._scan(ENDS + HEADERS, final, emit=state == "content")
                if marker is None:
                    return
                if marker in HEADERS:
                    self._header, self._state = marker, "header"
                else:
                    self._state = "outside"
            elif state == "call":
                reader = self._reader
                self._buf = self._buf[reader.feed(self._buf) :]
                if reader.status == "done":
                    self._reader, self._state = None, "call_end"
                elif reader.status == "error":
                    self._emit_content(self._header + "".join(reader.raw))
                    self._reader, self._state = None, "skip"
                elif final:
                    self._emit_content(self._header + reader.abort() + self._buf)
                    self._buf = ""
                    return
                else:
                    return
            elif state == "call_end":
                if self._expect(ENDS, final) is False:
                    return
                self._state = "outside"
            else:  # skip: the rest of a malformed call, through its end marker, is content
                marker = self._scan(ENDS + HEADERS, final)
                if marker is None:
                    return
                if marker in HEADERS:
                    self._header, self._state = marker, "header"
                else:
                    self._emit_content(marker)
                    self._state = "outside"

    def _open_message(self) -> None:
        recipient = _RECIPIENT.search(self._header)
        channel = _CHANNEL.search(self._header)
        if recipient:
            name = recipient.group(1)
            name = name.removeprefix("functions.")
            self._reader = ArgsReader(self, name)
            self._state = "call"
        elif channel and channel.group(1) == "analysis":
            self._state = "drop"
        else:
            self._state = "content"
