"""The streaming reasoning-parser contract shared by every format.

A :class:`ReasoningParser` splits one request's decoded output into *reasoning* (the model's
thinking, sent as ``reasoning_content`` / thinking blocks) and *content* (the answer). It is fed
decoded text piece by piece, in whatever pieces the detokenizer produces; a marker such as
``</think>`` may be split anywhere between pieces.

Streaming rule: a parser holds back only text that could still turn out to be (part of) a marker
and releases everything else at once. Feeding the same output in any pieces yields the same
concatenated reasoning and content, and :meth:`ReasoningParser.parse` is that split for the whole
text (it is implemented as one :meth:`~ReasoningParser.feed` plus :meth:`~ReasoningParser.finish`).

The text handed to a parser must be decoded *with* special tokens (``<think>``, ``[THINK]``,
``<|channel|>`` are special tokens in most vocabularies); skipping them would erase the markers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass
class ReasoningDelta:
    """What one :meth:`ReasoningParser.feed` (or ``finish``) releases: either part may be empty."""

    reasoning: str = ""  # thinking text to show as reasoning now
    content: str = ""  # answer text now

    def __bool__(self) -> bool:
        return bool(self.reasoning or self.content)


class ReasoningParser:
    """One per request: stateful, fed decoded pieces in order, then finished once.

    ``starts_in_reasoning`` is True when the rendered prompt already opened a thinking block (see
    :func:`mlxctl.api.reasoning.prompt_opens_reasoning`), so the output begins inside thinking.
    """

    name: ClassVar[str]
    # The text that ends thinking; the server watches for it to start grammar constraints after it.
    end_marker: ClassVar[str]
    # The text the server feeds into the generation to force thinking closed (ThinkingBudget).
    closing_text: ClassVar[str]
    # Suffixes of a rendered prompt (trailing whitespace ignored) that leave thinking open.
    prompt_open_suffixes: ClassVar[tuple[str, ...]]

    def __init__(self, *, starts_in_reasoning: bool = False):
        self.starts_in_reasoning = starts_in_reasoning
        self._finished = False

    def feed(self, text: str) -> ReasoningDelta:
        """Take the next decoded piece; return what can be released now."""
        if self._finished:
            raise RuntimeError("feed() after finish()")
        return self._feed(text)

    def finish(self) -> ReasoningDelta:
        """End of output: release everything still held back (idempotent)."""
        if self._finished:
            return ReasoningDelta()
        self._finished = True
        return self._finish()

    @property
    def in_reasoning(self) -> bool:
        """True while the output is (as far as is known) inside thinking."""
        raise NotImplementedError

    @classmethod
    def parse(cls, text: str, *, starts_in_reasoning: bool = False) -> tuple[str | None, str | None]:
        """Split a whole output: ``(reasoning or None, content or None)``; equal to any streamed split."""
        parser = cls(starts_in_reasoning=starts_in_reasoning)
        first, last = parser.feed(text), parser.finish()
        reasoning, content = first.reasoning + last.reasoning, first.content + last.content
        return reasoning or None, content or None

    @classmethod
    def prompt_opens(cls, rendered_prompt: str) -> bool:
        """True when the rendered prompt ends inside an open thinking block."""
        tail = rendered_prompt.rstrip()
        return any(tail.endswith(suffix) for suffix in cls.prompt_open_suffixes)

    # -- what each format implements

    def _feed(self, text: str) -> ReasoningDelta:
        raise NotImplementedError

    def _finish(self) -> ReasoningDelta:
        raise NotImplementedError


def held_suffix_length(text: str, markers: tuple[str, ...]) -> int:
    """Length of the longest end of ``text`` that is a proper beginning of one of ``markers``.

    That much must be held back: the next piece may complete the marker.
    """
    best = 0
    for marker in markers:
        for size in range(min(len(marker) - 1, len(text)), best, -1):
            if text.endswith(marker[:size]):
                best = size
                break
    return best


def find_first(text: str, markers: tuple[str, ...]) -> tuple[int, str]:
    """Earliest occurrence of any of ``markers`` in ``text``: (index, marker), or (-1, "")."""
    found, which = -1, ""
    for marker in markers:
        index = text.find(marker)
        if index >= 0 and (found < 0 or index < found or (index == found and len(marker) > len(which))):
            found, which = index, marker
    return found, which
