"""Responses API <-> engine: conversation, prompt tokens, sampling parameters, outcome, usage.

The only module that speaks both the Responses wire vocabulary and the engine's. A conversation is
a list of chat-template messages; ``previous_response_id`` prepends the stored one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mlxctl.api.prompt import render_chat
from mlxctl.api.responses_models import MessageItem, ResponsesRequest
from mlxctl.api.responses_objects import ResponseDraft
from mlxctl.engine.events import FinishReason, Usage
from mlxctl.engine.sampling import SamplingParams
from mlxctl.errors import UnavailableError

_ROLES = {"developer": "system"}


def _message(item: MessageItem) -> dict[str, str]:
    content = item.content if isinstance(item.content, str) else "".join(p.text for p in item.content)
    return {"role": _ROLES.get(item.role, item.role), "content": content}


def input_messages(req: ResponsesRequest) -> list[dict[str, str]]:
    if isinstance(req.input, str):
        return [{"role": "user", "content": req.input}]
    return [_message(item) for item in req.input]


def conversation(req: ResponsesRequest, previous: Sequence[dict[str, str]] = ()) -> list[dict[str, str]]:
    """The earlier turns (from previous_response_id) followed by this request's input."""
    return [*previous, *input_messages(req)]


def prompt_tokens(tokenizer: Any, req: ResponsesRequest, messages: list[dict[str, str]]) -> list[int]:
    """Instructions apply to this request only: they are not carried to the next one."""
    system = [{"role": "system", "content": req.instructions}] if req.instructions else []
    return render_chat(tokenizer, system + messages)


def sampling_params(req: ResponsesRequest) -> SamplingParams:
    return SamplingParams(
        max_tokens=req.max_output_tokens,
        temperature=1.0 if req.temperature is None else req.temperature,
        top_p=1.0 if req.top_p is None else req.top_p,
    )


def usage_body(usage: Usage) -> dict:
    return {"input_tokens": usage.prompt_tokens,
            "input_tokens_details": {"cached_tokens": usage.cached_tokens},
            "output_tokens": usage.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage.total_tokens}


def outcome(reason: FinishReason) -> tuple[str, dict | None]:
    """The response's (status, incomplete_details) for how the generation ended."""
    if reason is FinishReason.STOP:
        return "completed", None
    if reason is FinishReason.LENGTH:
        return "incomplete", {"reason": "max_output_tokens"}
    raise UnavailableError(f"the generation was stopped early ({reason.value})")


def finished_body(draft: ResponseDraft, reason: FinishReason, text: str, usage: Usage) -> dict:
    status, incomplete = outcome(reason)
    item = draft.message_item(text, status)
    return draft.body(status, [item], usage_body(usage), incomplete)


def with_reply(messages: list[dict[str, str]], text: str) -> tuple[dict[str, str], ...]:
    """The conversation to store: what was sent plus the assistant's answer."""
    return (*messages, {"role": "assistant", "content": text})
