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


def _strip_layout(value: str) -> str:
    """Drop the one newline the template writes after ``<parameter=...>`` and before its end."""
    value = value.removeprefix("\n")
    value = value.removesuffix("\n")
    return value


class Qwen3CoderParser(ValuesBlockParser):
    """The format's tags are class attributes: Seed-OSS and MiniMax-M2 write the same structure
    under other tags (:mod:`~mlxctl.api.toolcalls.seed_oss`, :mod:`~mlxctl.api.toolcalls.minimax_m2`)."""

    name: ClassVar[str] = "qwen3_coder"
    START: ClassVar[str] = START
    END: ClassVar[str] = END
    FUNCTION: ClassVar[str] = FUNCTION
    FUNCTION_END: ClassVar[str] = FUNCTION_END
    PARAMETER: ClassVar[str] = PARAMETER
    PARAMETER_END: ClassVar[str] = PARAMETER_END
    _end = END

    def __init__(self, tools: list[dict] | None = None):
        super().__init__(tools)
        self._param = ""
        self._value_ends = (self.PARAMETER_END, self.PARAMETER, self.FUNCTION_END, self.END)

    @classmethod
    def tag_text(cls, name: str) -> str:
        """A name as a tag writes it, after ``<function=`` or ``<parameter=``."""
        return name

    @classmethod
    def read_name(cls, text: str) -> str | None:
        """The name a tag holds (``text`` is what comes before its ``>``); None if malformed."""
        name = text.strip()
        return None if not name or "<" in name or "\n" in name else name

    def _tag_name(self, prefix: str, final: bool) -> str | None | bool:
        """Read ``prefix NAME>`` at the buffer start: NAME, False to wait, None if malformed."""
        buf = self._buf
        end = buf.find(">", len(prefix), len(prefix) + MAX_NAME + 1)
        if end == -1:
            return None if final or len(buf) > len(prefix) + MAX_NAME else False
        name = self.read_name(buf[len(prefix) : end])
        if name is None:
            return None
        self._consume(end + 1)
        return name

    def _in_text(self, final: bool) -> bool:
        return self._block_start(self.START, "function", final)

    def _in_function(self, final: bool) -> bool:
        return self._call_tag(final, self.FUNCTION, lambda last: self._tag_name(self.FUNCTION, last))

    def _in_params(self, final: bool) -> bool:
        tag = self._lead((self.PARAMETER, self.FUNCTION_END, self.END), final)
        if tag is False:
            return False
        if tag == self.PARAMETER:
            return self._open_param(final)
        if tag is None:
            return self._give_up(final)
        if tag == self.FUNCTION_END:
            self._consume(len(self.FUNCTION_END))
        self._end_call("after")
        return True

    def _open_param(self, final: bool) -> bool:
        """``<parameter=NAME>``: the value follows."""
        return self._then(self._tag_name(self.PARAMETER, final), final, self._got_param)

    def _got_param(self, param: str) -> None:
        self._param = param
        self._searched = 0
        self._state = "value"

    def _value_end(self) -> tuple[int, str] | None:
        """The first tag in the buffer that ends a value (position, tag); None while none has come."""
        start = max(0, self._searched - max(map(len, self._value_ends)))
        ends = [(i, t) for t in self._value_ends if (i := self._buf.find(t, start)) != -1]
        self._searched = 0 if ends else len(self._buf)
        return min(ends) if ends else None

    def _in_value(self, final: bool) -> bool:
        found = self._value_end()
        if found is None:
            return self._give_up(final) if final else False
        pos, tag = found
        value = self._consume(pos)
        if tag == self.PARAMETER_END:
            self._consume(len(self.PARAMETER_END))
        self._emit_member(self._param, _strip_layout(value))
        self._state = "params"
        return True

    def _in_after(self, final: bool) -> bool:
        return self._next_call(final, self.END, self.FUNCTION, "function")
