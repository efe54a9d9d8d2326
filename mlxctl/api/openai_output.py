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

from mlxctl.api.chat_split import OutputSplitter, new_splitter
from mlxctl.api.openai_logprobs import TokenBytes, chat_logprobs, legacy_logprobs
from mlxctl.api.openai_pieces import Piece
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
        choices = [self.choice(i, piece) for i, piece in enumerate(pieces)]
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
        self._called: set[int] = set()
        self._blank: dict[int, str] = {}  # a choice's blank text held back (see _content)
        self._said: set[int] = set()  # choices that have sent text that is not blank

    def splitter(self, index: int) -> OutputSplitter:
        if index not in self._splitters:
            self._splitters[index] = new_splitter(self.plan, self.reasoning_open)
        return self._splitters[index]

    def choice(self, index: int, piece: Piece) -> dict[str, Any]:
        splitter = self.splitter(index)
        splitter.feed(piece.text)
        splitter.finish()
        result = splitter.result()
        message: dict[str, Any] = {"role": "assistant", "content": result.content, "refusal": None}
        if result.reasoning is not None:
            message |= {"reasoning_content": result.reasoning, "reasoning": result.reasoning}
        if result.calls:
            message["tool_calls"] = [{"id": c.id, "type": "function",
                                      "function": {"name": c.name, "arguments": c.arguments}} for c in result.calls]
        reason = "tool_calls" if result.calls and piece.finish_reason == "stop" else piece.finish_reason
        return {"index": index, "message": message, "logprobs": chat_logprobs(self.tokens, piece.logprobs),
                "finish_reason": reason}

    def chunk(self, index: int, piece: Piece) -> dict[str, Any] | None:
        choice = self.chunk_choice(index, piece)
        return None if choice is None else self._chunk([choice])

    def chunk_choice(self, index: int, piece: Piece) -> dict[str, Any] | None:
        splitter = self.splitter(index)
        split = splitter.feed(piece.text)
        if piece.finish_reason is not None:
            split.extend(splitter.finish())
        delta: dict[str, Any] = {}
        if split.reasoning:
            delta |= {"reasoning_content": split.reasoning, "reasoning": split.reasoning}
        if split.calls:
            self._called.add(index)
        content = self._content(index, splitter, split.content, piece.finish_reason is not None)
        if content or (splitter.passthrough and piece.finish_reason is None):
            delta["content"] = content
        if split.calls:
            delta["tool_calls"] = [_call_delta(d) for d in split.calls]
        reason = piece.finish_reason
        if reason == "stop" and index in self._called:
            reason = "tool_calls"
        if not delta and reason is None and not piece.logprobs:
            return None  # text held back by a parser: nothing to send yet
        return {"index": index, "delta": delta, "logprobs": chat_logprobs(self.tokens, piece.logprobs),
                "finish_reason": reason}

    def _content(self, index: int, splitter: OutputSplitter, text: str, last: bool) -> str:
        """With tools, blank text before anything else is said (the newlines between ``</think>``
        and a call) waits: it is sent with the text that follows, or at the end unless a tool was
        called, so that the stream joins to the message's content (null for calls and blank text)."""
        if splitter.tools is None or index in self._said:
            return text
        text = self._blank.pop(index, "") + text
        if text.strip():
            self._said.add(index)
            return text
        if last:
            return "" if index in self._called else text
        self._blank[index] = text
        return ""

    def opening(self, index: int, echo: str) -> dict[str, Any]:
        delta = {"role": "assistant", "content": ""}
        return self._chunk([{"index": index, "delta": delta, "logprobs": None, "finish_reason": None}])


def _call_delta(d: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"index": d.index}
    if d.id is not None:
        out |= {"id": d.id, "type": "function"}
    fn: dict[str, Any] = {}
    if d.name is not None:
        fn["name"] = d.name
    fn["arguments"] = d.arguments
    return out | {"function": fn}


class CompletionOutput(OpenAIOutput):
    id_prefix, object, chunk_object = "cmpl", "text_completion", "text_completion"

    def choice(self, index: int, piece: Piece) -> dict[str, Any]:
        logprobs = legacy_logprobs(self.tokens, piece.logprobs, piece.offset)
        return {"index": index, "text": piece.text, "logprobs": logprobs, "finish_reason": piece.finish_reason}

    chunk_choice = choice

    def opening(self, index: int, echo: str) -> dict[str, Any] | None:
        return self.chunk(index, Piece(echo)) if echo else None
