"""GLM-4.5 / 4.6 / 4.7: ``<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>``.

GLM-4.5/4.6 put newlines between the parts (``<tool_call>NAME\\n<arg_key>...``), GLM-4.7 does
not; both are read. A value is the text between ``<arg_value>`` and ``</arg_value>`` as written
(GLM's template writes strings raw and other values as JSON), converted to the type the tool's
schema gives the argument (string when it gives none). The call is announced when its name is
complete (at the first ``<``) and each argument is sent as an arguments fragment at its
``</arg_value>``; the object is closed at ``</tool_call>``. A block without ``</tool_call>`` by
the end of the output, or with anything else inside, is released as content.
"""

from __future__ import annotations

from typing import ClassVar

from mlxctl.api.toolcalls.blocks import ValuesBlockParser

START = "<tool_call>"
END = "</tool_call>"
KEY = "<arg_key>"
KEY_END = "</arg_key>"
VALUE = "<arg_value>"
VALUE_END = "</arg_value>"


def _nonblank(key: str | None | bool) -> str | None | bool:
    """A key as read, stripped; a blank key is malformed (None)."""
    return (key.strip() or None) if isinstance(key, str) else key


class Glm4Parser(ValuesBlockParser):
    name: ClassVar[str] = "glm4"
    _end = END

    def __init__(self, tools: list[dict] | None = None):
        super().__init__(tools)
        self._key = ""

    def _in_text(self, final: bool) -> bool:
        return self._block_start(START, "name", final)

    def _in_name(self, final: bool) -> bool:
        end = self._name_end("<", final)
        if end is False:
            return False
        name = None if end is None else self._buf[:end].strip()
        if not name or any(c.isspace() for c in name):
            return self._give_up(final)
        self._consume(end)
        self._begin_call(name, "args")
        return True

    def _in_args(self, final: bool) -> bool:
        tag = self._lead((KEY, END), final)
        if tag is False:
            return False
        if tag is None:
            return self._give_up(final)
        self._consume(len(tag))
        if tag == KEY:
            self._state = "key"
        else:
            self._end_call("text")
        return True

    def _in_key(self, final: bool) -> bool:
        key = self._until(KEY_END, final)
        return self._then(_nonblank(key), final, self._got_key)

    def _got_key(self, key: str) -> None:
        self._key = key
        self._state = "value_open"

    def _in_value_open(self, final: bool) -> bool:
        return self._then(self._lead((VALUE,), final), final, self._got_value_open)

    def _got_value_open(self, tag: str) -> None:
        self._consume(len(tag))
        self._state = "value"

    def _in_value(self, final: bool) -> bool:
        return self._then(self._until(VALUE_END, final, limit=None), final, self._got_value)

    def _got_value(self, value: str) -> None:
        self._emit_member(self._key, value)
        self._state = "args"
