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

from mlxctl.api.toolcalls.blocks import MAX_NAME, ValuesBlockParser

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


class Qwen3CoderParser(ValuesBlockParser):
    name: ClassVar[str] = "qwen3_coder"
    _end = END

    def __init__(self, tools: list[dict] | None = None):
        super().__init__(tools)
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

    def _in_text(self, final: bool) -> bool:
        return self._block_start(START, "function", final)

    def _in_function(self, final: bool) -> bool:
        return self._call_tag(final, FUNCTION, lambda last: self._tag_name(FUNCTION, last))

    def _in_params(self, final: bool) -> bool:
        tag = self._lead((PARAMETER, FUNCTION_END, END), final)
        if tag is False:
            return False
        if tag == PARAMETER:
            return self._open_param(final)
        if tag is None:
            return self._give_up(final)
        if tag == FUNCTION_END:
            self._consume(len(FUNCTION_END))
        self._end_call("after")
        return True

    def _open_param(self, final: bool) -> bool:
        """``<parameter=NAME>``: the value follows."""
        return self._then(self._tag_name(PARAMETER, final), final, self._got_param)

    def _got_param(self, param: str) -> None:
        self._param = param
        self._searched = 0
        self._state = "value"

    def _value_end(self) -> tuple[int, str] | None:
        """The first tag in the buffer that ends a value (position, tag); None while none has come."""
        start = max(0, self._searched - len(PARAMETER_END))
        ends = [(i, t) for t in _VALUE_ENDS if (i := self._buf.find(t, start)) != -1]
        self._searched = 0 if ends else len(self._buf)
        return min(ends) if ends else None

    def _in_value(self, final: bool) -> bool:
        found = self._value_end()
        if found is None:
            return self._give_up(final) if final else False
        pos, tag = found
        value = self._consume(pos)
        if tag == PARAMETER_END:
            self._consume(len(PARAMETER_END))
        self._emit_member(self._param, _strip_layout(value))
        self._state = "params"
        return True

    def _in_after(self, final: bool) -> bool:
        return self._next_call(final, END, FUNCTION, "function")
