"""DeepSeek V3.2 calls, in DSML (the ``｜`` bars are fullwidth, U+FF5C).

As DeepSeek's own encoder (``encoding_dsv32.py``) writes them::

    <｜DSML｜function_calls>
    <｜DSML｜invoke name="get_weather">
    <｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>
    <｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜function_calls>

A parameter with ``string="true"`` is the text as written; with ``string="false"`` it is JSON (read
by the parameter's schema, as the text-valued formats read values, where it is not valid JSON).
Several ``invoke`` blocks in one ``function_calls`` block are several calls. The call is announced
at its complete ``invoke`` tag and each parameter is sent as an arguments fragment when it closes;
the object is closed at ``</｜DSML｜invoke>``. A block with anything else inside, or cut off by
the end of the output before ``</｜DSML｜invoke>``, is released as content; a complete call whose
``</｜DSML｜function_calls>`` never came (the output ended) is kept.
"""

from __future__ import annotations

import json
import re
from typing import ClassVar

from mlxctl.api.toolcalls.base import parameters_schema
from mlxctl.api.toolcalls.blocks import MAX_NAME, ValuesBlockParser
from mlxctl.api.toolcalls.values import convert_value, property_schema

DSML = "｜DSML｜"
CALLS_BEGIN = f"<{DSML}function_calls>"
CALLS_END = f"</{DSML}function_calls>"
INVOKE = f'<{DSML}invoke name="'
INVOKE_END = f"</{DSML}invoke>"
PARAMETER = f'<{DSML}parameter name="'
PARAMETER_END = f"</{DSML}parameter>"
_TAG_CLOSE = '">'
_PARAMETER_TAIL = re.compile(r'([^"<>\n]+)"\s+string="(true|false)"\s*>')
_HEADER_ROOM = MAX_NAME + 32  # the longest parameter tag read after its name's opening quote


class DeepSeekV32Parser(ValuesBlockParser):
    name: ClassVar[str] = "deepseek_v32"
    _end = CALLS_END

    def __init__(self, tools: list[dict] | None = None):
        super().__init__(tools)
        self._param = ""
        self._is_string = True

    def _in_text(self, final: bool) -> bool:
        return self._block_start(CALLS_BEGIN, "invoke", final)

    def _in_invoke(self, final: bool) -> bool:
        return self._call_tag(final, INVOKE, self._invoke_name)

    def _invoke_name(self, final: bool) -> str | None | bool:
        """``<｜DSML｜invoke name="NAME">`` at the buffer start: NAME, False to wait, None if malformed."""
        end = self._buf.find(_TAG_CLOSE, len(INVOKE), len(INVOKE) + MAX_NAME + len(_TAG_CLOSE))
        if end == -1:
            return None if final or len(self._buf) >= len(INVOKE) + MAX_NAME + len(_TAG_CLOSE) else False
        name = self._buf[len(INVOKE) : end]
        if not name or any(c in name for c in '"<>\n'):
            return None
        self._consume(end + len(_TAG_CLOSE))
        return name

    def _in_params(self, final: bool) -> bool:
        tag = self._lead((PARAMETER, INVOKE_END), final)
        if tag is False:
            return False
        if tag is None:
            return self._give_up(final)
        if tag == INVOKE_END:
            self._consume(len(INVOKE_END))
            self._end_call("after")
            return True
        return self._then(self._parameter_tag(final), final, self._got_param)

    def _parameter_tag(self, final: bool) -> tuple[str, bool] | None | bool:
        """``<｜DSML｜parameter name="KEY" string="true|false">``: (KEY, is a string), False to wait,
        None if malformed."""
        end = self._buf.find(">", len(PARAMETER), len(PARAMETER) + _HEADER_ROOM)
        if end == -1:
            return None if final or len(self._buf) >= len(PARAMETER) + _HEADER_ROOM else False
        match = _PARAMETER_TAIL.fullmatch(self._buf, len(PARAMETER), end + 1)
        if match is None:
            return None
        self._consume(end + 1)
        return match.group(1), match.group(2) == "true"

    def _got_param(self, tag: tuple[str, bool]) -> None:
        self._param, self._is_string = tag
        self._searched = 0
        self._state = "value"

    def _in_value(self, final: bool) -> bool:
        value = self._until(PARAMETER_END, final, limit=None)
        if value is False:
            return False
        if value is None:
            return self._give_up(final)
        self._emit_args(self._call, self._writer.member(self._param, self._value(value)))
        self._state = "params"
        return True

    def _value(self, text: str):
        """A parameter's value: its text when marked a string, else its JSON (or, where that is
        not valid JSON, the text read by the parameter's schema)."""
        if self._is_string:
            return text
        try:
            return json.loads(text)
        except ValueError:
            schema = property_schema(parameters_schema(self._functions.get(self._call.name)), self._param)
            return convert_value(text, schema)

    def _in_after(self, final: bool) -> bool:
        return self._next_call(final, CALLS_END, INVOKE, "invoke")
