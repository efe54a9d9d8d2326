"""One choice's generated text -> reasoning, answer content and tool calls, streamed or whole.

The text goes through the reasoning parser first (when the model thinks), and its answer part
through the tool-call parser (when the request offered tools). Every API's output (OpenAI chat,
Anthropic messages, Responses) is built from the :class:`Split` pieces this yields, so the three
agree on what was reasoning, what was said and what was called.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from mlxctl.api.toolcalls import ToolCall, ToolCallDelta


@dataclass
class Split:
    reasoning: str = ""
    content: str = ""
    calls: list[ToolCallDelta] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.reasoning or self.content or self.calls)

    def extend(self, other: "Split") -> None:
        self.reasoning += other.reasoning
        self.content += other.content
        self.calls.extend(other.calls)


@dataclass(frozen=True)
class SplitResult:
    reasoning: str | None
    content: str | None
    calls: list[ToolCall]


class OutputSplitter:
    def __init__(self, reasoning: Any = None, tools: Any = None):
        """``reasoning``: a ReasoningParser instance or None; ``tools``: a ToolParser or None."""
        self.reasoning, self.tools = reasoning, tools
        self._reasoning_text: list[str] = []
        self._content: list[str] = []

    @property
    def passthrough(self) -> bool:
        return self.reasoning is None and self.tools is None

    def feed(self, text: str) -> Split:
        if self.passthrough:
            self._content.append(text)
            return Split(content=text)
        if self.reasoning is None:
            return self._answer("", text)
        step = self.reasoning.feed(text)
        return self._answer(step.reasoning, step.content)

    def whole(self, text: str) -> SplitResult:
        """A finished choice's whole text, split."""
        self.feed(text)
        self.finish()
        return self.result()

    def finish(self) -> Split:
        if self.passthrough:
            return Split()
        out = Split()
        if self.reasoning is not None:
            step = self.reasoning.finish()
            out.extend(self._answer(step.reasoning, step.content))
        if self.tools is not None:
            tail = self.tools.finish()
            self._content.append(tail.content)
            out.extend(Split(content=tail.content, calls=list(tail.calls)))
        return out

    def _answer(self, reasoning: str, content: str) -> Split:
        self._reasoning_text.append(reasoning)
        if self.tools is None or not content:
            self._content.append(content)
            return Split(reasoning, content)
        parsed = self.tools.feed(content)
        self._content.append(parsed.content)
        return Split(reasoning, parsed.content, list(parsed.calls))

    def result(self) -> SplitResult:
        """After ``finish()``: the whole choice."""
        reasoning = "".join(self._reasoning_text) or None
        if self.tools is not None:
            content, calls = self.tools.result()
            return SplitResult(reasoning, content, calls)
        return SplitResult(reasoning, "".join(self._content), [])


def new_splitter(plan: Any, reasoning_open: bool) -> OutputSplitter:
    """The parsers a plan asks for, fresh for one choice."""
    if plan is None:
        return OutputSplitter()
    from mlxctl.api import reasoning, toolcalls

    think = reasoning.get_parser(plan.reasoning_parser)(starts_in_reasoning=reasoning_open) if plan.reasoning_parser else None
    tools = toolcalls.get_parser(plan.tool_parser)(plan.tools) if plan.tool_parser else None
    if tools is not None:  # a call streams only once complete: one cut off by max_tokens is text
        tools.whole_calls = True
    return OutputSplitter(think, tools)


def arguments_object(arguments: str) -> Any:
    """A call's arguments as a JSON value (parsers guarantee valid JSON text)."""
    try:
        return json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return {}
