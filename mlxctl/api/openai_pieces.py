"""Engine events -> pieces of one choice's output: whole (non-streamed) or in stream chunks.

A :class:`Piece` is what one response choice or one stream chunk carries for a choice: text, its
tokens' logprobs, where the text starts in the choice, and the finish reason on the last one.
:class:`ChunkGrouper` groups ``interval`` token events per piece; its last piece is always sent,
empty text or not, because it carries the finish reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlxctl.engine.events import FinishEvent, FinishReason, TokenEvent, TokenLogprob
from mlxctl.engine.streams import Completion
from mlxctl.errors import UnavailableError

_REASONS = {FinishReason.STOP: "stop", FinishReason.LENGTH: "length"}


def finish_reason(reason: FinishReason) -> str:
    """OpenAI's finish_reason; an aborted request is an error, never a short answer."""
    if reason in _REASONS:
        return _REASONS[reason]
    raise UnavailableError(f"the request was stopped before it finished ({reason.value})")


@dataclass(frozen=True)
class Piece:
    text: str
    logprobs: tuple[TokenLogprob, ...] | None = None
    offset: int = 0  # characters of the choice before this text (echo included)
    finish_reason: str | None = None


def whole(completion: Completion, echo: str = "") -> Piece:
    """A finished choice as one piece (echoed prompt first)."""
    return Piece(echo + completion.text, completion.logprobs, len(echo), finish_reason(completion.finish_reason))


class ChunkGrouper:
    """Collects one choice's token events into pieces of ``interval`` tokens each."""

    def __init__(self, interval: int, logprobs: bool, offset: int = 0):
        self._interval = max(1, interval)
        self._logprobs = logprobs
        self._offset = offset
        self._texts: list[str] = []
        self._lps: list[TokenLogprob] = []
        self._tokens = 0

    def add(self, event: TokenEvent | FinishEvent, raw: bool = False) -> Piece | None:
        """``raw``: the last piece carries no finish_reason (the caller maps the FinishEvent)."""
        if isinstance(event, FinishEvent):
            return self._take(event.text, None if raw else finish_reason(event.reason))
        self._texts.append(event.text)
        self._lps.extend(event.logprobs or ())
        self._tokens += len(event.token_ids)
        due = self._tokens >= self._interval and (any(self._texts) or (self._logprobs and self._lps))
        return self._take("") if due else None

    def _take(self, tail: str, reason: str | None = None) -> Piece:
        text = "".join(self._texts) + tail
        piece = Piece(text, tuple(self._lps) if self._logprobs else None, self._offset, reason)
        self._offset += len(text)
        self._texts, self._lps, self._tokens = [], [], 0
        return piece
