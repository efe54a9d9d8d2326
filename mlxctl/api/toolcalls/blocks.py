"""Helpers for formats whose calls are blocks of tags read piece by piece (XML-style formats)."""

from __future__ import annotations

from mlxctl.api.toolcalls.base import ToolParser, _Call
from mlxctl.api.toolcalls.jsonstream import CallObjectReader

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


class CallArrayParser(BlockParser):
    """A format whose calls are a JSON array of call objects after a marker (Mistral, Granite).

    States ``array`` (before an element), ``object`` (inside one) and ``array_sep`` (after one)
    read ``[{"name": ..., "arguments": {...}}, ...]``; a call streams as its object arrives. A
    malformed element is released as content, with whatever follows it.
    """

    def __init__(self, tools: list[dict] | None = None):
        super().__init__(tools)
        self._reader: CallObjectReader | None = None

    def _fail(self, final: bool) -> None:
        if self._reader is not None:
            self._raw.append("".join(self._reader.raw))
            self._reader = None
        super()._fail(final)

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
                self._state = "text"
            else:  # the array is not closed: what follows is content
                self._emit_content("".join(self._raw))
                self._raw = []
                self._state = "text"
        return True
