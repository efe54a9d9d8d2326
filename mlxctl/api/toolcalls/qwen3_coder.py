"""Qwen3-Coder (and Qwen3.5-style) XML calls.

::

    <tool_call>
    <function=get_weather>
    <parameter=city>
    Paris
    </parameter>
    </function>
    </tool_call>

Values are text, converted to the type the tool's schema gives the parameter (string when it
gives none); one leading and one trailing newline around a value are layout, not value. The
call is announced when ``<function=NAME>`` is complete and each parameter is sent as an
arguments fragment when it closes (``</parameter>``, or leniently the next ``<parameter=`` or
``</function>``); the object is closed at ``</function>``. A block without ``</function>`` by the
end of the output, or with anything else inside, is released as content. Several
``<function=...>`` in one block are several calls.
"""

from __future__ import annotations

from typing import ClassVar

from mlxctl.api.toolcalls.base import parameters_schema
from mlxctl.api.toolcalls.blocks import MAX_NAME, BlockParser
from mlxctl.api.toolcalls.values import ArgumentsWriter, convert_value, property_schema

START = "<tool_call>"
END = "</tool_call>"
FUNCTION = "<function="
FUNCTION_END = "</function>"
PARAMETER = "<parameter="
PARAMETER_END = "</parameter>"
_VALUE_ENDS = (PARAMETER_END, PARAMETER, FUNCTION_END, END)


def _strip_layout(value: str) -> str:
    """Drop the one newline the template writes after ``<parameter=...>`` and before its end."""
    value = value.removeprefix("\n")
    value = value.removesuffix("\n")
    return value


class Qwen3CoderParser(BlockParser):
    name: ClassVar[str] = "qwen3_coder"
    _end = END

    def __init__(self, tools: list[dict] | None = None):
        super().__init__(tools)
        self._writer = ArgumentsWriter()
        self._param = ""

    def _tag_name(self, prefix: str, final: bool) -> str | None | bool:
        """Read ``prefix NAME>`` at the buffer start: NAME, False to wait, None if malformed."""
        buf = self._buf
        end = buf.find(">", len(prefix), len(prefix) + MAX_NAME + 1)
        if end == -1:
            return None if final or len(buf) > len(prefix) + MAX_NAME else False
        name = buf[len(prefix) : end].strip()
        if not name or "<" in name or "\n" in name:
            return None
        self._consume(end + 1)
        return name

    def _process(self, final: bool) -> None:
        while True:
            state = self._state
            if state == "text":
                if self._scan((START,), final) is None:
                    return
                self._raw = [START]
                self._state = "function"
            elif state == "function":
                tag = self._lead((FUNCTION,), final)
                if tag is False:
                    return
                name = None if tag is None else self._tag_name(FUNCTION, final)
                if name is False:
                    return
                if name is None:
                    self._fail(final)
                    continue
                self._call = self._open_call(name)
                self._writer = ArgumentsWriter()
                self._state = "params"
            elif state == "params":
                tag = self._lead((PARAMETER, FUNCTION_END, END), final)
                if tag is False:
                    return
                if tag == PARAMETER:
                    param = self._tag_name(PARAMETER, final)
                    if param is False:
                        return
                    if param is None:
                        self._fail(final)
                        continue
                    self._param = param
                    self._searched = 0
                    self._state = "value"
                elif tag in (FUNCTION_END, END):
                    if tag == FUNCTION_END:
                        self._consume(len(FUNCTION_END))
                    self._emit_args(self._call, self._writer.close())
                    self._close_call(self._call)
                    self._call, self._raw = None, []
                    self._state = "after"
                else:
                    self._fail(final)
            elif state == "value":
                buf = self._buf
                start = max(0, self._searched - len(PARAMETER_END))
                ends = [(i, t) for t in _VALUE_ENDS if (i := buf.find(t, start)) != -1]
                if not ends:
                    if final:
                        self._fail(final)
                        continue
                    self._searched = len(buf)
                    return
                self._searched = 0
                pos, tag = min(ends)
                value = self._consume(pos)
                if tag == PARAMETER_END:
                    self._consume(len(PARAMETER_END))
                schema = property_schema(
                    parameters_schema(self._functions.get(self._call.name)), self._param
                )
                converted = convert_value(_strip_layout(value), schema)
                self._emit_args(self._call, self._writer.member(self._param, converted))
                self._state = "params"
            elif state == "after":
                tag = self._expect((END, FUNCTION), final)
                if tag is False:
                    return
                if tag == FUNCTION:
                    self._buf = FUNCTION + self._buf
                    self._raw = []
                    self._state = "function"
                else:
                    self._state = "text"
            elif not self._skip(final):
                return
