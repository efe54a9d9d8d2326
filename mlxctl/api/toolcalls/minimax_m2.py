"""MiniMax-M2: ``<invoke>`` calls with named parameters inside ``<minimax:tool_call>``.

::

    <minimax:tool_call>
    <invoke name="get_weather">
    <parameter name="city">Paris</parameter>
    <parameter name="days">3</parameter>
    </invoke>
    </minimax:tool_call>

The structure is Qwen3-Coder's (:mod:`~mlxctl.api.toolcalls.qwen3_coder`, whose rules this
format follows in full) under other tags: ``<invoke name="NAME">`` for ``<function=NAME>`` and
``<parameter name="KEY">`` for ``<parameter=KEY>``. A name is read between double quotes (single
quotes or none are accepted too). Values are text, typed by the tool's schema; one leading and
one trailing newline are layout. Several ``<invoke>`` in one block are several calls. Thinking
is ``<think>...</think>`` (the ``think`` reasoning format).
"""

from __future__ import annotations

from typing import ClassVar

from mlxctl.api.toolcalls.qwen3_coder import Qwen3CoderParser

START = "<minimax:tool_call>"
END = "</minimax:tool_call>"
INVOKE = "<invoke name="
INVOKE_END = "</invoke>"
PARAMETER = "<parameter name="
PARAMETER_END = "</parameter>"
_QUOTES = ('"', "'")


class MiniMaxM2Parser(Qwen3CoderParser):
    name: ClassVar[str] = "minimax_m2"
    START: ClassVar[str] = START
    END: ClassVar[str] = END
    FUNCTION: ClassVar[str] = INVOKE
    FUNCTION_END: ClassVar[str] = INVOKE_END
    PARAMETER: ClassVar[str] = PARAMETER
    PARAMETER_END: ClassVar[str] = PARAMETER_END
    _end = END

    @classmethod
    def tag_text(cls, name: str) -> str:
        return f'"{name}"'

    @classmethod
    def read_name(cls, text: str) -> str | None:
        text = text.strip()
        if len(text) >= 2 and text[0] == text[-1] and text[0] in _QUOTES:
            text = text[1:-1]
        return None if any(q in text for q in _QUOTES) else super().read_name(text)
