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
    id_prefix, object, chunk_object = "chatcmpl", "chat.completion", "chat.completion.chunk"

    def choice(self, index: int, piece: Piece) -> dict[str, Any]:
        message = {"role": "assistant", "content": piece.text, "refusal": None}
        return {"index": index, "message": message, "logprobs": chat_logprobs(self.tokens, piece.logprobs),
                "finish_reason": piece.finish_reason}

    def chunk_choice(self, index: int, piece: Piece) -> dict[str, Any]:
        delta = {"content": piece.text} if piece.text or piece.finish_reason is None else {}
        return {"index": index, "delta": delta, "logprobs": chat_logprobs(self.tokens, piece.logprobs),
                "finish_reason": piece.finish_reason}

    def opening(self, index: int, echo: str) -> dict[str, Any]:
        delta = {"role": "assistant", "content": ""}
        return self._chunk([{"index": index, "delta": delta, "logprobs": None, "finish_reason": None}])


class CompletionOutput(OpenAIOutput):
    id_prefix, object, chunk_object = "cmpl", "text_completion", "text_completion"

    def choice(self, index: int, piece: Piece) -> dict[str, Any]:
        logprobs = legacy_logprobs(self.tokens, piece.logprobs, piece.offset)
        return {"index": index, "text": piece.text, "logprobs": logprobs, "finish_reason": piece.finish_reason}

    chunk_choice = choice

    def opening(self, index: int, echo: str) -> dict[str, Any] | None:
        return self.chunk(index, Piece(echo)) if echo else None
