"""GPT-OSS (OpenAI Harmony): reasoning and answer travel in separate channel messages.

The prompt ends with ``<|start|>assistant``; the output is a run of messages::

    <|channel|>analysis<|message|>THINKING<|end|>
    <|start|>assistant<|channel|>final<|message|>ANSWER<|return|>

Each message is a header (``<|start|>ROLE`` except on the first one, whose role is in the prompt;
``<|channel|>NAME``; maybe a recipient ``to=...`` and ``<|constrain|>json``) up to
``<|message|>``, then a body up to ``<|end|>``, ``<|return|>`` or ``<|call|>``.

What each message becomes:

* ``analysis`` body -> reasoning.
* ``final`` body -> content; so is a ``commentary`` body without a recipient (a preamble, meant
  for the user) and a body on any other channel.
* A message with a recipient (``to=functions.NAME`` on ``commentary``, or a built-in tool such as
  ``to=python`` on any channel) is a tool call: the whole message -- header, ``<|message|>``,
  arguments and its ``<|call|>`` terminator, exactly as generated -- is passed through untouched
  as *content*, so the tool-call parser that reads the content sees it. Only its header is held
  back until ``<|message|>`` shows it is a call.
* Headers and the ``<|end|>`` / ``<|return|>`` terminators of other messages are dropped. Bodies
  are not trimmed (Harmony puts no newline after its markers).
* ``<|start|>`` or ``<|channel|>`` inside a body ends it without a terminator (small models
  sometimes skip ``<|end|>``).
* Output that does not look like Harmony at all (it starts with anything but ``<|`` or ``to=``, or
  a header runs past 512 characters) is all content, verbatim.
* At the end of the output an unfinished header is dropped, unless it names a recipient (then it is
  content, for the tool parser to judge) or has no Harmony token in it (then it is plain text).

``starts_in_reasoning``: the prompt already ends with ``<|channel|>analysis<|message|>``.
"""

from __future__ import annotations

import enum
import re

from mlxctl.api.reasoning.base import ReasoningDelta, ReasoningParser, find_first, held_suffix_length

_MESSAGE = "<|message|>"
_TERMINATORS = ("<|end|>", "<|return|>", "<|call|>")
_NEXT_HEADER = ("<|start|>", "<|channel|>")  # end a body that was never terminated
_BODY_ENDS = _TERMINATORS + _NEXT_HEADER
_HEADER_STARTS = ("<|", "to=", " to=")
_HEADER_LIMIT = 512
_CHANNEL = re.compile(r"<\|channel\|>\s*([A-Za-z_]+)")


class _State(enum.Enum):
    HEADER = "header"
    BODY = "body"
    PLAIN = "plain"  # not Harmony: everything is content


class _Body(enum.Enum):
    REASONING = "reasoning"
    CONTENT = "content"
    TOOL = "tool"  # passed through raw as content


def _looks_like_header(text: str) -> bool:
    return any(text.startswith(start) or start.startswith(text) for start in _HEADER_STARTS)


def _body_kind(header: str) -> _Body:
    if "to=" in header:
        return _Body.TOOL
    channels = _CHANNEL.findall(header)
    if channels and channels[-1] == "analysis":
        return _Body.REASONING
    return _Body.CONTENT


class GptOssParser(ReasoningParser):
    """Harmony channels: ``analysis`` is reasoning, ``final`` is content, tool calls pass through."""

    name = "gpt_oss"
    end_marker = "<|channel|>final<|message|>"  # found with or without <|start|>assistant before it
    closing_text = "<|end|><|start|>assistant<|channel|>final<|message|>"
    prompt_open_suffixes = ("<|channel|>analysis<|message|>",)

    def __init__(self, *, starts_in_reasoning: bool = False):
        super().__init__(starts_in_reasoning=starts_in_reasoning)
        self._held = ""
        if starts_in_reasoning:
            self._state, self._body = _State.BODY, _Body.REASONING
        else:
            self._state, self._body = _State.HEADER, _Body.CONTENT

    @property
    def in_reasoning(self) -> bool:
        return self._state is _State.BODY and self._body is _Body.REASONING

    def _feed(self, text: str) -> ReasoningDelta:
        self._held += text
        return self._advance(final=False)

    def _finish(self) -> ReasoningDelta:
        return self._advance(final=True)

    def _advance(self, *, final: bool) -> ReasoningDelta:
        reasoning: list[str] = []
        content: list[str] = []
        while True:
            if self._state is _State.PLAIN:
                content.append(self._held)
                self._held = ""
                break
            if self._state is _State.HEADER:
                if not _looks_like_header(self._held):
                    self._state = _State.PLAIN
                    continue
                index = self._held.find(_MESSAGE)
                if 0 <= index <= _HEADER_LIMIT:
                    header = self._held[:index]
                    self._held = self._held[index + len(_MESSAGE) :]
                    self._state, self._body = _State.BODY, _body_kind(header)
                    if self._body is _Body.TOOL:
                        content.append(header + _MESSAGE)
                    continue
                if len(self._held) >= _HEADER_LIMIT + len(_MESSAGE):
                    self._state = _State.PLAIN
                    continue
                if final:
                    if "to=" in self._held or "<|" not in self._held:
                        content.append(self._held)
                    self._held = ""
                break
            # a message body
            out = reasoning if self._body is _Body.REASONING else content
            index, marker = find_first(self._held, _BODY_ENDS)
            if index >= 0:
                out.append(self._held[:index])
                if marker in _TERMINATORS:
                    if self._body is _Body.TOOL:
                        content.append(marker)
                    index += len(marker)
                self._held = self._held[index:]
                self._state = _State.HEADER
                continue
            keep = 0 if final else held_suffix_length(self._held, _BODY_ENDS)
            cut = len(self._held) - keep
            out.append(self._held[:cut])
            self._held = self._held[cut:]
            break
        return ReasoningDelta("".join(reasoning), "".join(content))
