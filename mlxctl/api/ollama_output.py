"""Ollama's response objects and NDJSON stream lines (/api/chat and /api/generate).

Each line carries ``model``, ``created_at`` and ``done``; a chat line its ``message`` (role,
content, and ``thinking`` / ``tool_calls`` when there are some), a generate line its
``response`` (and ``thinking``). The last line (or the whole response) adds ``done_reason`` and
the counts and durations, in nanoseconds. ``context`` is never sent (docs/serve.md).
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

from mlxctl.api.chat_split import Split, SplitResult, arguments_object
from mlxctl.engine.events import FinishEvent, FinishReason, Timings, Usage

NS = 1_000_000_000


def created_at() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


class OllamaOutput:
    """One request's lines; ``chat`` picks the message shape, else the generate one."""

    def __init__(self, model: str, chat: bool, started: float, load_s: float = 0.0):
        self.model, self.chat = model, chat
        self.started, self.load_s = started, load_s  # time.perf_counter() at the request's start

    def line(self, reasoning: str, content: str, calls: list[dict], done: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "created_at": created_at()}
        if self.chat:
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if reasoning:
                message["thinking"] = reasoning
            if calls:
                message["tool_calls"] = calls
            body["message"] = message
        else:
            body["response"] = content
            if reasoning:
                body["thinking"] = reasoning
        return {**body, "done": done}

    def chunk(self, split: Split) -> dict[str, Any] | None:
        """A streamed piece; None when the parsers held everything back."""
        if not split:
            return None
        return self.line(split.reasoning, split.content, whole_calls(split))

    def final(self, tail: Split, finish: FinishEvent) -> dict[str, Any]:
        """The last streamed line: what the parsers released at the end, and the statistics."""
        stats = self.stats(finish.reason, finish.usage, finish.timings)
        return {**self.line(tail.reasoning, tail.content, whole_calls(tail), done=True), **stats}

    def whole(self, result: SplitResult, done: Any) -> dict[str, Any]:
        """The response of a request that did not stream (``done``: the engine's Completion)."""
        calls = [call_object(c.name, c.arguments) for c in result.calls]
        stats = self.stats(done.finish_reason, done.usage, done.timings)
        return {**self.line(result.reasoning or "", result.content or "", calls, done=True), **stats}

    def loaded(self, reason: str) -> dict[str, Any]:
        """The answer to a request with nothing to generate: ``reason`` is load or unload."""
        return {**self.line("", "", [], done=True), "done_reason": reason}

    def stats(self, reason: FinishReason, usage: Usage, timings: Timings) -> dict[str, Any]:
        return {"done_reason": reason.value, "total_duration": _ns(time.perf_counter() - self.started),
                "load_duration": _ns(self.load_s), "prompt_eval_count": usage.prompt_tokens,
                "prompt_eval_duration": _ns(timings.queue_s + timings.prefill_s), "eval_count": usage.completion_tokens,
                "eval_duration": _ns(timings.decode_s)}


def whole_calls(split: Split) -> list[dict]:
    """The calls of a split: with ``whole_calls`` parsers each arrives complete, as the deltas of
    one release (the first names it, the rest carry its arguments)."""
    names: dict[int, str] = {}
    arguments: dict[int, str] = {}
    for delta in split.calls:
        if delta.name is not None:
            names[delta.index] = delta.name
        arguments[delta.index] = arguments.get(delta.index, "") + delta.arguments
    return [call_object(names[i], arguments.get(i, "")) for i in sorted(names)]


def call_object(name: str, arguments: str) -> dict[str, Any]:
    """A call as Ollama sends it: the arguments as an object."""
    return {"function": {"name": name, "arguments": arguments_object(arguments)}}


def _ns(seconds: float) -> int:
    return max(0, int(seconds * NS))
