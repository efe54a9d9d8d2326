"""Token ids -> text, incrementally, and stop strings over a text stream.

:class:`IncrementalDetokenizer` decodes a small sliding window of ids (vLLM's prefix / read
offsets) instead of the whole output per token. It emits text only once it is stable: a byte-level
BPE token may end in the middle of a multibyte UTF-8 character, which decodes to U+FFFD, so such
text is held back until a later token completes it. Decoding the window from ``prefix`` (the
previous emitted piece) rather than from ``read`` keeps decoders that treat a sequence's first
token specially (SentencePiece drops its leading space) from changing the new text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

REPLACEMENT_CHAR = "\ufffd"


class Decoder(Protocol):
    def decode(self, ids: list[int], skip_special_tokens: bool = ...) -> str: ...


class IncrementalDetokenizer:
    """Feed ids one at a time with :meth:`add`; each call returns only newly stable text.

    ``context_ids`` (optional, e.g. the last few prompt ids) seed the window so the first
    generated token decodes as it would mid-text; they are never emitted.
    """

    def __init__(
        self,
        tokenizer: Decoder,
        skip_special_tokens: bool = True,
        *,
        context_ids: Sequence[int] = (),
    ):
        self._tokenizer = tokenizer
        self._skip_special = skip_special_tokens
        self._window: list[int] = list(context_ids)  # ids from the prefix offset on
        self._read = len(self._window)  # window index where the unemitted ids start
        self._pieces: list[str] = []

    @property
    def text(self) -> str:
        """Everything emitted so far."""
        return "".join(self._pieces)

    def add(self, token_id: int) -> str:
        """Append one id; return the text it completes ('' while a character is unfinished)."""
        self._window.append(token_id)
        prefix_text, full_text = self._decode_window()
        if len(full_text) <= len(prefix_text) or full_text.endswith(REPLACEMENT_CHAR):
            return ""
        return self._emit(full_text[len(prefix_text) :])

    def flush(self) -> str:
        """Return whatever is held back (at the end of generation), invalid bytes and all."""
        if self._read == len(self._window):
            return ""
        prefix_text, full_text = self._decode_window()
        return self._emit(full_text[len(prefix_text) :])

    def _decode_window(self) -> tuple[str, str]:
        prefix_text = self._decode(self._window[: self._read])
        return prefix_text, self._decode(self._window)

    def _decode(self, ids: list[int]) -> str:
        if not ids:
            return ""
        return self._tokenizer.decode(ids, skip_special_tokens=self._skip_special)

    def _emit(self, delta: str) -> str:
        """Slide the window: the ids just read become the next prefix."""
        self._window = self._window[self._read :]
        self._read = len(self._window)
        if delta:
            self._pieces.append(delta)
        return delta


class StopMatcher:
    """Cuts a text stream at the first stop string, never leaking part of one.

    "First" means the first to complete as the text streams in (the earliest end; of two that end
    at the same place, the longer), so the result does not depend on how the text is chunked.
    """

    def __init__(self, stops: Sequence[str]):
        if any(not stop for stop in stops):
            raise ValueError("stop strings must be non-empty")
        self._stops = tuple(stops)
        self._held = ""
        self.stopped = False
        self.matched: str | None = None  # the stop string that was hit

    def feed(self, text: str) -> tuple[str, bool]:
        """Return (text safe to emit now, whether a stop string was hit).

        After a hit every call returns ("", True).
        """
        if self.stopped:
            return "", True
        if not self._stops:
            return text, False
        buffer = self._held + text
        cut = self._first_stop(buffer)
        if cut is not None:
            self.matched = self._stop_at(buffer, cut)
            self.stopped, self._held = True, ""
            return buffer[:cut], True
        keep = self._partial_stop_length(buffer)
        self._held = buffer[len(buffer) - keep :]
        return buffer[: len(buffer) - keep], False

    def flush(self) -> str:
        """Return the held-back text when generation ends without a stop."""
        held, self._held = self._held, ""
        return "" if self.stopped else held

    def _first_stop(self, buffer: str) -> int | None:
        """Start of the stop occurrence that ends first (ties: the longer stop), or None."""
        hits = []
        for stop in self._stops:
            start = buffer.find(stop)
            if start >= 0:
                hits.append((start + len(stop), start))
        return min(hits)[1] if hits else None

    def _stop_at(self, buffer: str, cut: int) -> str:
        """The longest stop string starting at ``cut`` (the one ``_first_stop`` chose)."""
        return max((s for s in self._stops if buffer.startswith(s, cut)), key=len)

    def _partial_stop_length(self, buffer: str) -> int:
        """Length of the longest suffix of ``buffer`` that a stop string starts with."""
        longest = 0
        for stop in self._stops:
            for size in range(min(len(stop) - 1, len(buffer)), longest, -1):
                if buffer.endswith(stop[:size]):
                    longest = size
                    break
        return longest
