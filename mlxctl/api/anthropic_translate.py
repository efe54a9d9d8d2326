"""Anthropic Messages <-> engine: prompt tokens, sampling parameters, stop reasons, usage.

The only module that speaks both the Anthropic wire vocabulary and the engine's.
"""

from __future__ import annotations

import uuid
from typing import Any

from mlxctl.api.anthropic_models import (
    CountTokensRequest,
    ImageBlock,
    Message,
    MessagesRequest,
)
from mlxctl.api.prompt import encode_text, render_chat
from mlxctl.engine.events import FinishReason, Usage
from mlxctl.engine.sampling import SamplingParams
from mlxctl.errors import BadInputError, UnavailableError


def new_message_id() -> str:
    return f"msg_{uuid.uuid4().hex[:24]}"


def _text_of(content: str | list, where: str) -> str:
    if isinstance(content, str):
        return content
    if any(isinstance(block, ImageBlock) for block in content):
        raise BadInputError(f"{where}: image content is not supported yet")
    return "\n".join(block.text for block in content)


def _system_text(req: CountTokensRequest) -> str | None:
    if req.system is None or isinstance(req.system, str):
        return req.system or None
    return "\n".join(block.text for block in req.system) or None


def _chat_message(message: Message, index: int) -> dict[str, str]:
    return {"role": message.role, "content": _text_of(message.content, f"messages.{index}.content")}


def chat_messages(req: CountTokensRequest) -> list[dict[str, str]]:
    """The conversation as chat-template messages, the system prompt first."""
    system = _system_text(req)
    head = [{"role": "system", "content": system}] if system else []
    return head + [_chat_message(m, i) for i, m in enumerate(req.messages)]


def prompt_tokens(tokenizer: Any, req: CountTokensRequest) -> list[int]:
    """The prompt's token ids. A final assistant message is a prefill the reply continues."""
    messages = chat_messages(req)
    if messages[-1]["role"] != "assistant":
        return render_chat(tokenizer, messages)
    prefill = messages.pop()["content"]
    return render_chat(tokenizer, messages) + encode_text(tokenizer, prefill, special=False)


def sampling_params(req: MessagesRequest) -> SamplingParams:
    return SamplingParams(
        max_tokens=req.max_tokens,
        temperature=1.0 if req.temperature is None else req.temperature,
        top_p=1.0 if req.top_p is None else req.top_p,
        top_k=req.top_k or 0,
        stop=tuple(req.stop_sequences or ()),
    )


def stop_reason(reason: FinishReason, stop_string: str | None) -> tuple[str, str | None]:
    """Anthropic's (stop_reason, stop_sequence) for a finished generation."""
    if reason is FinishReason.LENGTH:
        return "max_tokens", None
    if reason is not FinishReason.STOP:
        raise UnavailableError(f"the generation was stopped early ({reason.value})")
    return ("stop_sequence", stop_string) if stop_string is not None else ("end_turn", None)


def usage_body(input_tokens: int, output_tokens: int, cache_read: int = 0) -> dict[str, int]:
    """Anthropic counts prompt tokens read from the cache apart from the rest of the input."""
    return {"input_tokens": input_tokens - cache_read, "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": cache_read}


def message_body(message_id: str, model: str, text: str, stop: tuple[str, str | None], usage: Usage) -> dict:
    """The non-streamed response: one text block."""
    return {
        "id": message_id, "type": "message", "role": "assistant", "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop[0], "stop_sequence": stop[1],
        "usage": usage_body(usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens),
    }
