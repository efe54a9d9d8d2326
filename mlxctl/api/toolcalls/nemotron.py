"""NVIDIA Nemotron (Llama-3.3-Nemotron-Super, Nemotron-Nano v1/v2):
``<TOOLCALL>[{"name": ..., "arguments": {...}}, ...]</TOOLCALL>``.

The markers hold a JSON array of call objects (a single object without the array is accepted);
arguments stream as they arrive. Text before ``<TOOLCALL>`` and after ``</TOOLCALL>`` is
content; a complete array whose ``</TOOLCALL>`` never came (the output ended) is accepted. A
malformed call is released as content through the block's ``</TOOLCALL>``. Thinking, when the
system prompt says ``detailed thinking on``, is ``<think>...</think>`` (the ``think`` reasoning
format). (Nemotron 3 writes Qwen3-Coder's XML calls: use ``qwen3_coder`` for it.)
"""

from __future__ import annotations

from typing import ClassVar

from mlxctl.api.toolcalls.blocks import CallArrayParser

START = "<TOOLCALL>"
END = "</TOOLCALL>"


class NemotronParser(CallArrayParser):
    name: ClassVar[str] = "nemotron"
    _end = END
    _after_array = "close"

    def _in_text(self, final: bool) -> bool:
        return self._block_start(START, "start", final)

    def _in_start(self, final: bool) -> bool:
        tag = self._open_calls(final)
        if tag is None:
            self._fail(final)
        return tag is not False

    def _in_close(self, final: bool) -> bool:
        if self._expect((END,), final) is False:
            return False
        self._state = "text"
        return True
