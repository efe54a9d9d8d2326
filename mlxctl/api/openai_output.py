"""OpenAI response objects and stream chunks, built from :class:`Piece` values and usage.

:class:`ChatOutput` makes ``chat.completion`` / ``chat.completion.chunk`` objects,
:class:`CompletionOutput` the legacy ``text_completion`` ones. One instance serves one request,
so every chunk of a stream shares its ``id`` and ``created``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

from mlxctl.api.chat_split import OutputSplitter, SplitResult, new_splitter
from mlxctl.api.openai_logprobs import TokenBytes, chat_logprobs, legacy_logprobs
from mlxctl.api.openai_pieces import Piece
from mlxctl.api.output_stream import CALL, REASONING, ChoiceSegments, Delta, Open, Segment
from mlxctl.engine.events import Usage


def total_usage(usages: Sequence[Usage], n: int) -> Usage:
    """Usage of a whole response: each prompt counted once (not once per choice)."""
    firsts = usages[::n]
    return Usage(sum(u.prompt_tokens for u in firsts), sum(u.completion_tokens for u in usages),
                 sum(u.cached_tokens for u in firsts))


def usage_body(usage: Usage) -> dict[str, Any]:
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens, "prompt_tokens_details": {"cached_tokens": usage.cached_tokens}}


class OpenAIOutput:
    """What both endpoints' objects share: id, created, model, usage, the chunk envelope."""

    id_prefix = ""
    object = ""
    chunk_object = ""

    def __init__(self, model: str, tokenizer: Any, include_usage: bool = False):
        self.id = f"{self.id_prefix}-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model = model
        self.include_usage = include_usage
        self.tokens = TokenBytes(tokenizer)

    def _head(self, obj: str) -> dict[str, Any]:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model,
                "system_fingerprint": None}

    def response(self, pieces: Sequence[Piece], usage: Usage) -> dict[str, Any]:
        return self.body([self.choice(i, piece) for i, piece in enumerate(pieces)], usage)

    def body(self, choices: list[dict[str, Any]], usage: Usage) -> dict[str, Any]:
        return {**self._head(self.object), "choices": choices, "usage": usage_body(usage)}

    def chunk(self, index: int, piece: Piece) -> dict[str, Any]:
        return self._chunk([self.chunk_choice(index, piece)])

    def usage_chunk(self, usage: Usage) -> dict[str, Any]:
        return {**self._chunk([]), "usage": usage_body(usage)}

    def _chunk(self, choices: list[dict]) -> dict[str, Any]:
        body = {**self._head(self.chunk_object), "choices": choices}
        return {**body, "usage": None} if self.include_usage else body

    def choice(self, index: int, piece: Piece) -> dict[str, Any]:
        raise NotImplementedError

    def chunk_choice(self, index: int, piece: Piece) -> dict[str, Any]:
        raise NotImplementedError

    def opening(self, index: int, echo: str) -> dict[str, Any] | None:
        """The chunk that starts a choice's stream, if its protocol has one."""
        raise NotImplementedError


class ChatOutput(OpenAIOutput):
    """Chat objects; with a plan, each choice's text is split into reasoning, content and tool
    calls (``reasoning_content`` and ``reasoning`` both carry the reasoning)."""

    id_prefix, object, chunk_object = "chatcmpl", "chat.completion", "chat.completion.chunk"

    def __init__(self, model: str, tokenizer: Any, include_usage: bool = False, plan: Any = None,
                 reasoning_open: bool = False):
        super().__init__(model, tokenizer, include_usage)
        self.plan, self.reasoning_open = plan, reasoning_open
        self._splitters: dict[int, OutputSplitter] = {}
        self._streams: dict[int, ChoiceSegments] = {}

    def splitter(self, index: int) -> OutputSplitter:
        if index not in self._splitters:
            self._splitters[index] = new_splitter(self.plan, self.reasoning_open)
        return self._splitters[index]

    def choice(self, index: int, piece: Piece) -> dict[str, Any]:
        result = self.splitter(index).whole(piece.text)
        reason = "tool_calls" if result.calls and piece.finish_reason == "stop" else piece.finish_reason
        return self.split_choice(index, result, reason, piece.logprobs)

    def split_choice(self, index: int, result: SplitResult, reason: str, logprobs: Any = None) -> dict[str, Any]:
        """A choice from its split output and finish_reason."""
        message: dict[str, Any] = {"role": "assistant", "content": result.content, "refusal": None}
        if result.reasoning is not None:
            message |= {"reasoning_content": result.reasoning, "reasoning": result.reasoning}
        if result.calls:
            message["tool_calls"] = [{"id": c.id, "type": "function",
                                      "function": {"name": c.name, "arguments": c.arguments}} for c in result.calls]
        return {"index": index, "message": message, "logprobs": chat_logprobs(self.tokens, logprobs),
                "finish_reason": reason}

    def split_chunk(self, segments: list[Segment], reason: str | None = None) -> dict[str, Any] | None:
        """Choice 0's chunk from output segments (the MCP loop's rounds); None when it says nothing."""
        delta = _delta(segments)
        if not delta and reason is None:
            return None
        return self._chunk([{"index": 0, "delta": _ordered(delta), "logprobs": None, "finish_reason": reason}])

    def chunk(self, index: int, piece: Piece) -> dict[str, Any] | None:
        choice = self.chunk_choice(index, piece)
        return None if choice is None else self._chunk([choice])

    def chunk_choice(self, index: int, piece: Piece) -> dict[str, Any] | None:
        splitter, last = self.splitter(index), piece.finish_reason is not None
        if index not in self._streams:  # blank text waits only where a call would make it content
            self._streams[index] = ChoiceSegments(splitter, hold_blank=splitter.tools is not None)
        stream = self._streams[index]
        segments = stream.segments(piece.text, last)
        delta = _delta(segments)
        if "content" not in delta and splitter.passthrough and not last:
            delta["content"] = ""  # no parser: every chunk carries content, as the text came
        reason = "tool_calls" if piece.finish_reason == "stop" and stream.called else piece.finish_reason
        if not delta and reason is None and not piece.logprobs:
            return None  # text held back by a parser: nothing to send yet
        return {"index": index, "delta": _ordered(delta), "logprobs": chat_logprobs(self.tokens, piece.logprobs),
                "finish_reason": reason}

    def opening(self, index: int, echo: str) -> dict[str, Any]:
        delta = {"role": "assistant", "content": ""}
        return self._chunk([{"index": index, "delta": delta, "logprobs": None, "finish_reason": None}])


def _delta(segments: list[Segment]) -> dict[str, Any]:
    """One chunk's delta from its segments: reasoning, content and the calls' openings/arguments."""
    delta: dict[str, Any] = {}
    calls: list[dict[str, Any]] = []
    for segment in segments:
        if isinstance(segment, Open) and segment.part == CALL:
            calls.append({"index": segment.index, "id": segment.call_id, "type": "function",
                          "function": {"name": segment.name, "arguments": ""}})
        elif isinstance(segment, Delta) and segment.part == CALL:
            if not calls or calls[-1]["index"] != segment.index:
                calls.append({"index": segment.index, "function": {"arguments": ""}})
            calls[-1]["function"]["arguments"] += segment.text
        elif isinstance(segment, Delta):
            key = "reasoning_content" if segment.part == REASONING else "content"
            delta[key] = delta.get(key, "") + segment.text
    if calls:
        delta["tool_calls"] = calls
    return delta


def _ordered(delta: dict[str, Any]) -> dict[str, Any]:
    """Reasoning (under both of its names), then content, then tool calls."""
    out: dict[str, Any] = {}
    if "reasoning_content" in delta:
        out |= {"reasoning_content": delta["reasoning_content"], "reasoning": delta["reasoning_content"]}
    return out | {k: delta[k] for k in ("content", "tool_calls") if k in delta}


class CompletionOutput(OpenAIOutput):
    id_prefix, object, chunk_object = "cmpl", "text_completion", "text_completion"

    def choice(self, index: int, piece: Piece) -> dict[str, Any]:
        logprobs = legacy_logprobs(self.tokens, piece.logprobs, piece.offset)
        return {"index": index, "text": piece.text, "logprobs": logprobs, "finish_reason": piece.finish_reason}

    chunk_choice = choice

    def opening(self, index: int, echo: str) -> dict[str, Any] | None:
        return self.chunk(index, Piece(echo)) if echo else None
