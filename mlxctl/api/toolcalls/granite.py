"""IBM Granite 3.x: ``<|tool_call|>[{"name": ..., "arguments": {...}}, ...]``.

The marker is followed by a JSON array of call objects (a single object without the array is
accepted). Arguments stream as they arrive. Text before the marker, and after the array, is
content. A malformed call is released as content, with the text after it. (Granite 4 writes
Hermes-style ``<tool_call>`` blocks: use ``hermes`` for it.)
"""

from __future__ import annotations

from typing import ClassVar

from mlxctl.api.toolcalls.blocks import CallArrayParser

MARKER = "<|tool_call|>"


class GraniteParser(CallArrayParser):
    name: ClassVar[str] = "granite"

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
                    self._fail(final)
            elif not self._array_step(final):
                return
