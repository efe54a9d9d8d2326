"""One choice's streamed output as protocol-neutral segments, the cross-protocol rules applied once.

:class:`OutputStream` turns the :class:`~mlxctl.api.chat_split.Split` pieces of a choice into
:class:`Open`, :class:`Delta` and :class:`Close` segments of three kinds of part: ``reasoning``,
``text`` and ``call`` (one per tool call). At most one part is open at a time; a part of another
kind closes the open one. Every protocol encoder (OpenAI chunks, Anthropic content blocks,
Responses output items) is a map from these segments, so the rules below hold for all of them:

- **Blank text waits.** Blank text before anything is said (the newlines between ``</think>`` and
  a tool call) opens no text part: it is sent with the text that follows, or at the end when no
  tool was called. So a call's message has no content, and a stream joins to the whole message.
- **Something is always said.** A choice that produced nothing at all ends with an empty text part
  (Anthropic's empty text block, the Responses API's empty message).
- **A stop that ended in calls is a tool stop** (:attr:`OutputStream.called`).
"""

from __future__ import annotations

from dataclasses import dataclass

REASONING, TEXT, CALL = "reasoning", "text", "call"


@dataclass(frozen=True)
class Open:
    part: str
    call_id: str | None = None  # a call: its id, name and index among the choice's calls
    name: str | None = None
    index: int = 0


@dataclass(frozen=True)
class Delta:
    part: str
    text: str  # reasoning, answer text or a call's arguments
    index: int = 0


@dataclass(frozen=True)
class Close:
    part: str
    text: str  # the part's whole text
    call_id: str | None = None
    name: str | None = None
    index: int = 0


Segment = Open | Delta | Close


class OutputStream:
    """``feed(split)`` -> segments for each piece; ``finish()`` -> the last ones.

    ``hold_blank=False`` sends blank text as it comes (OpenAI chat without tools, which has no
    parts for whitespace to open and no call whose content must stay null)."""

    def __init__(self, hold_blank: bool = True):
        self.hold_blank = hold_blank
        self.called = False  # a tool call was opened
        self.opened = False  # any part was opened
        self._open: Open | None = None
        self._text = ""  # the open part's text so far
        self._blank = ""  # blank text held back
        self._said = False  # text that is not blank was sent

    def feed(self, split) -> list[Segment]:
        out: list[Segment] = []
        if split.reasoning:
            out += self._delta(REASONING, split.reasoning)
        if split.content:
            out += self._answer(split.content)
        for call in split.calls:
            if call.id is not None:
                self.called = True
                out += self._ensure(Open(CALL, call.id, call.name, call.index))
            if call.arguments and self._is_open(CALL, call.index):
                out += self._delta(CALL, call.arguments, call.index)
        return out

    def finish(self) -> list[Segment]:
        """Release held blank text (unless a tool was called), say something if nothing was, and
        close the open part."""
        out = self._answer("", final=True) if self._blank and not self.called else []
        self._blank = ""
        if not self.opened:
            out += self._ensure(Open(TEXT))
        return out + self._close()

    def _answer(self, text: str, final: bool = False) -> list[Segment]:
        text, self._blank = self._blank + text, ""
        if self.hold_blank and not final and not self._said and not self._is_open(TEXT) and not text.strip():
            self._blank = text
            return []
        self._said = self._said or bool(text.strip())
        return self._delta(TEXT, text)

    def _delta(self, part: str, text: str, index: int = 0) -> list[Segment]:
        out = [] if part == CALL else self._ensure(Open(part))
        self._text += text
        return out + [Delta(part, text, index)]

    def _is_open(self, part: str, index: int = 0) -> bool:
        return self._open is not None and self._open.part == part and self._open.index == index

    def _ensure(self, part: Open) -> list[Segment]:
        if part.part != CALL and self._is_open(part.part):
            return []
        out = self._close()
        self._open, self._text, self.opened = part, "", True
        return out + [part]

    def _close(self) -> list[Segment]:
        part, self._open = self._open, None
        if part is None:
            return []
        return [Close(part.part, self._text, part.call_id, part.name, part.index)]


class ChoiceSegments:
    """A choice's text, piece by piece, through its splitter (api/chat_split.py) into segments.

    ``hidden``: names of calls the client does not see (the MCP tools the server runs): their
    segments are left out (they still count as calls for the rules above)."""

    def __init__(self, splitter, hold_blank: bool = True, hidden=None):
        self.splitter, self.stream = splitter, OutputStream(hold_blank)
        self.hidden = hidden
        self._hidden_calls: set[int] = set()

    @property
    def called(self) -> bool:
        return self.stream.called

    def segments(self, text: str, last: bool) -> list[Segment]:
        out = self.stream.feed(self.splitter.feed(text)) if text else []
        if last:
            out += self.stream.feed(self.splitter.finish()) + self.stream.finish()
        return out if self.hidden is None else [s for s in out if not self._is_hidden(s)]

    def _is_hidden(self, segment: Segment) -> bool:
        if segment.part != CALL:
            return False
        if isinstance(segment, Open) and self.hidden(segment.name):
            self._hidden_calls.add(segment.index)
        return segment.index in self._hidden_calls
