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

from mlxctl.api.toolcalls.base import parameters_schema
from mlxctl.api.toolcalls.blocks import MAX_NAME, BlockParser
from mlxctl.api.toolcalls.values import ArgumentsWriter, convert_value, property_schema

START = "<tool_call>"
END = "</tool_call>"
KEY = "<arg_key>"
KEY_END = "</arg_key>"
VALUE = "<arg_value>"
VALUE_END = "</arg_value>"


class Glm4Parser(BlockParser):
    name: ClassVar[str] = "glm4"
    _end = END

    def __init__(self, tools: list[dict] | None = None):
        super().__init__(tools)
        self._writer = ArgumentsWriter()
        self._key = ""

    def _process(self, final: bool) -> None:
        while True:
            state = self._state
            if state == "text":
                if self._scan((START,), final) is None:
                    return
                self._raw = [START]
                self._state = "name"
            elif state == "name":
                buf = self._buf
                end = buf.find("<", 0, MAX_NAME + 1)
                if end == -1:
                    if final or len(buf) > MAX_NAME:
                        self._fail(final)
                        continue
                    return
                name = buf[:end].strip()
                if not name or any(c.isspace() for c in name):
                    self._fail(final)
                    continue
                self._consume(end)
                self._call = self._open_call(name)
                self._writer = ArgumentsWriter()
                self._state = "args"
            elif state == "args":
                tag = self._lead((KEY, END), final)
                if tag is False:
                    return
                if tag is None:
                    self._fail(final)
                elif tag == KEY:
                    self._consume(len(KEY))
                    self._state = "key"
                else:
                    self._consume(len(END))
                    self._emit_args(self._call, self._writer.close())
                    self._close_call(self._call)
                    self._call, self._raw = None, []
                    self._state = "text"
            elif state == "key":
                key = self._until(KEY_END, final)
                if key is False:
                    return
                if key is None or not key.strip():
                    self._fail(final)
                    continue
                self._key = key.strip()
                self._state = "value_open"
            elif state == "value_open":
                tag = self._lead((VALUE,), final)
                if tag is False:
                    return
                if tag is None:
                    self._fail(final)
                    continue
                self._consume(len(VALUE))
                self._state = "value"
            elif state == "value":
                value = self._until(VALUE_END, final, limit=None)
                if value is False:
                    return
                if value is None:
                    self._fail(final)
                    continue
                schema = property_schema(
                    parameters_schema(self._functions.get(self._call.name)), self._key
                )
                self._emit_args(
                    self._call, self._writer.member(self._key, convert_value(value, schema))
                )
                self._state = "args"
            elif not self._skip(final):
                return
