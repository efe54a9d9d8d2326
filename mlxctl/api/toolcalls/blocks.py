"""Helpers for formats whose calls are blocks of tags read piece by piece (XML-style formats)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlxctl.api.toolcalls.base import ToolParser, _Call, parameters_schema
from mlxctl.api.toolcalls.jsonstream import ArgsReader, CallObjectReader
from mlxctl.api.toolcalls.values import ArgumentsWriter, convert_value, property_schema

MAX_NAME = 256  # the longest function or parameter name a tag may hold


class BlockParser(ToolParser):
    """A parser that keeps the raw text of the current call block, to release it if malformed.

    ``_end`` is the block's closing marker: after a malformed block, text up to and including
    it is content (state ``skip``), then the parser goes to state ``_after_skip`` (at once
    when the format has no closing marker). Subclasses
    start a block by setting ``_raw`` to its opening marker.
    """

    _end: str = ""
    _after_skip: str = "text"  # the state after a malformed block's end marker

    def __init__(self, tools: list[dict] | None = None):
        super().__init__(tools)
        self._state = "text"
        self._raw: list[str] = []  # the block's text consumed since its last complete call
        self._call: _Call | None = None
        self._searched = 0  # how far the buffer was searched for an end tag

    def _consume(self, n: int) -> str:
        taken, self._buf = self._buf[:n], self._buf[n:]
        self._raw.append(taken)
        return taken

    def _fail(self, final: bool) -> None:
        """The block is malformed: what was read of it becomes content."""
        self._drop_call(self._call)
        self._call = None
        self._emit_content("".join(self._raw))
        self._raw = []
        self._state = "skip" if self._end else self._after_skip
        if final:
            self._emit_content(self._buf)
            self._buf = ""

    def _skip(self, final: bool) -> bool:
        """State ``skip``: release text through the block's end marker; False to wait."""
        marker = self._scan((self._end,), final)
        if marker is None:
            return False
        self._emit_content(marker)
        self._state = self._after_skip
        return True

    def _process(self, final: bool) -> None:
        while self._step(final):
            pass

    def _step(self, final: bool) -> bool:
        """One step in the current state, read by its method ``_in_<state>``; False to wait."""
        return getattr(self, "_in_" + self._state)(final)

    def _in_skip(self, final: bool) -> bool:
        return self._skip(final)

    def _give_up(self, final: bool) -> bool:
        """Release the malformed block (see :meth:`_fail`) and go on: a state method's return."""
        self._fail(final)
        return True

    def _then(self, got: Any, final: bool, use: Callable[[Any], None]) -> bool:
        """A state method's end, after a read that ``got`` False (wait for more text), None (the
        block is malformed: release it) or its value (passed to ``use``; reading goes on).
        """
        if got is False:
            return False
        if got is None:
            return self._give_up(final)
        use(got)
        return True

    def _block_start(self, marker: str, state: str, final: bool) -> bool:
        """State ``text``: release content up to ``marker``, then read the block in ``state``."""
        if self._scan((marker,), final) is None:
            return False
        self._raw = [marker]
        self._state = state
        return True

    def _name_end(self, stop: str, final: bool) -> int | None | bool:
        """Where ``stop`` ends the name the buffer starts with.

        False to wait for more; None when it does not come within ``MAX_NAME`` characters (or at
        all, with ``final``).
        """
        end = self._buf.find(stop, 0, MAX_NAME + 1)
        if end != -1:
            return end
        return None if final or len(self._buf) > MAX_NAME else False

    def _read_on(self, reader: ArgsReader | CallObjectReader, final: bool) -> bool | None:
        """Feed the buffer to a streaming reader (it keeps what it takes).

        True when its value is done (the block's text is then spent), False to wait for more,
        None when it failed and the block was released.
        """
        self._buf = self._buf[reader.feed(self._buf) :]
        if reader.status == "done":
            self._raw = []
            return True
        if reader.status == "error" or final:
            self._fail(final)
            return None
        return False

    def _lead(self, tags: tuple[str, ...], final: bool) -> str | None | bool:
        """Skip whitespace, then which of ``tags`` starts the buffer (not consumed).

        False while more text may still complete one; None when none can.
        """
        stripped = self._buf.lstrip()
        self._consume(len(self._buf) - len(stripped))
        for tag in tags:
            if stripped.startswith(tag):
                return tag
        if not final and any(tag.startswith(stripped) for tag in tags):
            return False
        return None

    def _until(self, end: str, final: bool, limit: int | None = MAX_NAME) -> str | None | bool:
        """Consume text up to and including ``end`` and return the text before it.

        False to wait for more; None when ``end`` does not come within ``limit`` characters
        (or at all, with ``final``).
        """
        buf = self._buf
        start = max(0, self._searched - len(end) + 1)
        stop = len(buf) if limit is None else min(len(buf), limit + len(end))
        pos = buf.find(end, start, stop)
        if pos == -1:
            if final or (limit is not None and len(buf) >= limit + len(end)):
                self._searched = 0
                return None
            self._searched = len(buf)
            return False
        self._searched = 0
        text = self._consume(pos)
        self._consume(len(end))
        return text


class ValuesBlockParser(BlockParser):
    """A block format whose arguments are text values, each converted to the type the tool's
    schema gives it and written as one member of the call's arguments object (GLM-4,
    Qwen3-Coder).
    """

    def __init__(self, tools: list[dict] | None = None):
        super().__init__(tools)
        self._writer = ArgumentsWriter()

    def _begin_call(self, name: str, state: str) -> None:
        self._call = self._open_call(name)
        self._writer = ArgumentsWriter()
        self._state = state

    def _emit_member(self, key: str, text: str) -> None:
        schema = property_schema(parameters_schema(self._functions.get(self._call.name)), key)
        self._emit_args(self._call, self._writer.member(key, convert_value(text, schema)))

    def _call_tag(self, final: bool, tag: str, read_name: Callable[[bool], str | None | bool]) -> bool:
        """A call's opening ``tag``, then the name ``read_name(final)`` reads (False to wait, None
        if malformed): the call begins, its parameters read in state ``params``; False to wait."""
        found = self._lead((tag,), final)
        if found is False:
            return False
        name = None if found is None else read_name(final)
        if name is False:
            return False
        if name is None:
            return self._give_up(final)
        self._begin_call(name, "params")
        return True

    def _next_call(self, final: bool, end: str, again: str, state: str) -> bool:
        """State ``after`` a call: ``end`` closes the block; ``again`` opens the next call, read in
        ``state`` (the tag is left for it); anything else is text. False to wait."""
        tag = self._expect((end, again), final)
        if tag is False:
            return False
        if tag == again:
            self._buf = again + self._buf
            self._raw = []
            self._state = state
        else:
            self._state = "text"
        return True

    def _end_call(self, state: str) -> None:
        """The call is complete: close its arguments object, then read on in ``state``."""
        self._emit_args(self._call, self._writer.close())
        if not self._close_call(self._call):  # a strict tool's call off its schema: content
            self._emit_content("".join(self._raw))
        self._call, self._raw = None, []
        self._state = state


class CallArrayParser(BlockParser):
    """A format whose calls are a JSON array of call objects after a marker (Mistral, Granite).

    States ``array`` (before an element), ``object`` (inside one) and ``array_sep`` (after one)
    read ``[{"name": ..., "arguments": {...}}, ...]``; a call streams as its object arrives. A
    malformed element is released as content, with whatever follows it. Once the array (or a
    single call object) is read, reading goes on in state ``_after_array``.
    """

    _after_array: str = "text"

    def __init__(self, tools: list[dict] | None = None):
        super().__init__(tools)
        self._reader: CallObjectReader | None = None

    def _fail(self, final: bool) -> None:
        if self._reader is not None:
            self._raw.append("".join(self._reader.raw))
            self._reader = None
        super()._fail(final)

    def _step(self, final: bool) -> bool:
        """A state's own method ``_in_<state>`` where the format has one, else the array states."""
        step = getattr(self, "_in_" + self._state, None)
        return step(final) if step else self._array_step(final)

    def _open_calls(self, final: bool) -> str | None | bool:
        """State ``start``: ``[`` opens an array of calls, ``{`` a single call object.

        Returns the one found, False to wait for more text, None when neither comes.
        """
        tag = self._lead(("[", "{"), final)
        if tag == "[":
            self._consume(1)
            self._state = "array"
        elif tag == "{":
            self._start_object(self._after_array)
        return tag

    def _start_object(self, after: str) -> None:
        self._reader = CallObjectReader(self)
        self._after_object = after
        self._state = "object"

    def _array_step(self, final: bool) -> bool:
        """One step in the array states; False to wait for more text."""
        state = self._state
        if state == "array":
            tag = self._lead(("{", "]"), final)
            if tag is False:
                return False
            if tag == "{":
                self._start_object("array_sep")
            elif tag == "]":  # an empty array (or a trailing comma): not a call, so content
                self._consume(1)
                self._emit_content("".join(self._raw))
                self._raw = []
                self._state = "text"
            else:
                self._fail(final)
        elif state == "object":
            reader = self._reader
            self._buf = self._buf[reader.feed(self._buf) :]
            if reader.status == "done":
                self._reader, self._raw = None, []
                self._state = self._after_object
            elif reader.status == "error" or final:
                self._fail(final)
            else:
                return False
        elif state == "array_sep":
            tag = self._lead((",", "]"), final)
            if tag is False:
                return False
            if tag == ",":
                self._consume(1)
                self._state = "array"
            elif tag == "]":
                self._consume(1)
                self._raw = []
                self._state = self._after_array
            else:  # the array is not closed: what follows is content
                self._emit_content("".join(self._raw))
                self._raw = []
                self._state = "text"
        return True
