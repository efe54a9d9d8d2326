"""Formats that wrap thinking in an opening and a closing marker: ``<think>``, ``[THINK]``,
``<seed:think>``, Granite, Gemma 4's thought channel.

The output is read as::

    [whitespace] [OPEN] reasoning CLOSE content        (thinking, then the answer)
    content                                             (no thinking at all)

* Opening: only a marker at the very start of the output (leading whitespace allowed, and dropped)
  opens thinking. When the prompt already opened it (``starts_in_reasoning``) the output starts in
  reasoning, and a repeated opening marker there is dropped too.
* Closing: the first closing marker ends thinking; everything after it is content, verbatim (a
  later marker in the content is content, it is not looked for).
* Unterminated: thinking that never closes is all reasoning. Output that did not start in thinking
  (no opening marker, ``starts_in_reasoning`` False) is all content, even if a stray closing
  marker turns up later: text already released as content is never taken back, so a server must
  pass ``starts_in_reasoning`` from :func:`prompt_opens_reasoning` when the template opens
  thinking in the prompt (QwQ, DeepSeek-R1 distills, Qwen3 thinking models).
* Whitespace: one ``"\\n"`` right after the opening marker (or at the start of output that begins
  in reasoning) is dropped from the reasoning, and one ``"\\n"`` right after the closing marker is
  dropped from the content; nothing else is trimmed. So Qwen3's ``"<think>\\nA\\n</think>\\n\\nB"``
  gives reasoning ``"A\\n"`` and content ``"\\nB"``.
"""

from __future__ import annotations

import enum
from typing import ClassVar

from mlxctl.api.reasoning.base import ReasoningDelta, ReasoningParser, find_first, held_suffix_length


class _Phase(enum.Enum):
    OPENING = "opening"  # nothing decided yet: the output may still start with an opening marker
    REASONING = "reasoning"
    CONTENT = "content"


class TaggedReasoningParser(ReasoningParser):
    """Reasoning between an opening and a closing marker (each may have spelling variants)."""

    open_markers: ClassVar[tuple[str, ...]]
    close_markers: ClassVar[tuple[str, ...]]
    always_starts_in_reasoning: ClassVar[bool] = False

    def __init__(self, *, starts_in_reasoning: bool = False):
        super().__init__(starts_in_reasoning=starts_in_reasoning or self.always_starts_in_reasoning)
        self._phase = _Phase.OPENING
        self._held = ""
        self._drop_newline = False  # one "\n" right after a marker is not part of the text

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "open_markers" in cls.__dict__ and "prompt_open_suffixes" not in cls.__dict__:
            cls.prompt_open_suffixes = cls.open_markers

    @property
    def in_reasoning(self) -> bool:
        if self._phase is _Phase.OPENING:
            return self.starts_in_reasoning
        return self._phase is _Phase.REASONING

    def _feed(self, text: str) -> ReasoningDelta:
        self._held += text
        return self._advance(final=False)

    def _finish(self) -> ReasoningDelta:
        return self._advance(final=True)

    def _advance(self, *, final: bool) -> ReasoningDelta:
        reasoning: list[str] = []
        content: list[str] = []
        while True:
            if self._phase is _Phase.OPENING:
                if not self._leave_opening(final):
                    break
                continue
            if self._drop_newline:
                if not self._held:
                    break
                self._held = self._held.removeprefix("\n")
                self._drop_newline = False
            if self._phase is _Phase.CONTENT:
                content.append(self._held)
                self._held = ""
                break
            index, marker = find_first(self._held, self.close_markers)
            if index >= 0:
                reasoning.append(self._held[:index])
                self._held = self._held[index + len(marker) :]
                self._phase, self._drop_newline = _Phase.CONTENT, True
                continue
            keep = 0 if final else held_suffix_length(self._held, self.close_markers)
            cut = len(self._held) - keep
            reasoning.append(self._held[:cut])
            self._held = self._held[cut:]
            break
        return ReasoningDelta("".join(reasoning), "".join(content))

    def _leave_opening(self, final: bool) -> bool:
        """Decide how the output starts, once the held text allows it; False: not yet."""
        head = self._held.lstrip()
        for marker in self.open_markers:
            if head.startswith(marker):
                self._held = head[len(marker) :]
                self._phase, self._drop_newline = _Phase.REASONING, True
                return True
        if not final and (not head or any(marker.startswith(head) for marker in self.open_markers)):
            return False
        if self.starts_in_reasoning:
            self._phase, self._drop_newline = _Phase.REASONING, True
        else:
            self._phase = _Phase.CONTENT
        return True


class ThinkParser(TaggedReasoningParser):
    """``<think>...</think>``: Qwen3, QwQ, DeepSeek-R1 distills, GLM, MiniMax and most others."""

    name = "think"
    open_markers = ("<think>",)
    close_markers = ("</think>",)
    end_marker = "</think>"
    closing_text = "\n</think>\n\n"


class DeepSeekR1Parser(ThinkParser):
    """DeepSeek-R1: ``<think>`` markers, but the output always starts in reasoning.

    The first R1 releases often leave ``<think>`` out of their output (their template does not put
    it in the prompt either), so output without any marker is reasoning until ``</think>``, and
    output that never closes thinking is all reasoning (vLLM's ``deepseek_r1`` parser does the
    same). ``starts_in_reasoning`` is ignored: it is always True here.
    """

    name = "deepseek_r1"
    always_starts_in_reasoning = True


class MistralParser(TaggedReasoningParser):
    """``[THINK]...[/THINK]``: Magistral Small/Medium 2507 and later (special tokens)."""

    name = "mistral"
    open_markers = ("[THINK]",)
    close_markers = ("[/THINK]",)
    end_marker = "[/THINK]"
    closing_text = "\n[/THINK]\n"


class SeedOssParser(TaggedReasoningParser):
    """ByteDance Seed-OSS: ``<seed:think>...</seed:think>``.

    With a thinking budget the model reports on it inside its thinking
    (``<seed:cot_budget_reflect>...</seed:cot_budget_reflect>``): those tags are reasoning text.
    A budget of 0 makes the template close thinking in the prompt, so the output is the answer.
    """

    name = "seed_oss"
    open_markers = ("<seed:think>",)
    close_markers = ("</seed:think>",)
    end_marker = "</seed:think>"
    closing_text = "\n</seed:think>\n"


class GraniteParser(TaggedReasoningParser):
    """IBM Granite 3.2 with ``thinking=True``: plain-text phrases, not special tokens.

    Thinking follows ``Here is my thought process:`` and the answer follows ``Here is my
    response:`` (the Granite 3.2 template's own instruction); ``Here's`` is accepted for both, as
    quantized models have been seen writing it. Output without the first phrase is all content.
    """

    name = "granite"
    open_markers = ("Here is my thought process:", "Here's my thought process:")
    close_markers = ("Here is my response:", "Here's my response:")
    end_marker = "Here is my response:"
    closing_text = "\n\nHere is my response:\n"


class Gemma4Parser(TaggedReasoningParser):
    """Gemma 4's thought channel: ``<|channel>thought\\n...<channel|>`` (``<|channel>`` and
    ``<channel|>`` are special tokens; ``thought`` is the channel's name, not reasoning).

    Thinking is switched on by ``<|think|>`` in the system turn (``enable_thinking``); with it
    off, the template itself writes an empty ``<|channel>thought\\n<channel|>`` after the
    generation prompt, which does not open thinking.
    """

    name = "gemma4"
    open_markers = ("<|channel>thought",)
    close_markers = ("<channel|>",)
    end_marker = "<channel|>"
    closing_text = "<channel|>"
