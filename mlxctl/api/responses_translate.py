"""Responses API <-> engine: conversation, prompt tokens, sampling parameters, outcome, usage.

The only module that speaks both the Responses wire vocabulary and the engine's. A conversation is
a list of chat-template messages; ``previous_response_id`` prepends the stored one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mlxctl.api.chat_plan import (
    ChatPlan,
    ModelFormats,
    make_plan,
    openai_choice,
    render_plan,
    responses_text_format,
    responses_tools,
)
from mlxctl.api.chat_split import SplitResult, arguments_object
from mlxctl.api.responses_models import (
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    ReasoningItem,
    ResponsesRequest,
)
from mlxctl.api.responses_objects import ResponseDraft, output_items
from mlxctl.engine.events import FinishReason, Usage
from mlxctl.engine.sampling import SamplingParams
from mlxctl.errors import UnavailableError

_ROLES = {"developer": "system"}


def _message(item: MessageItem) -> dict[str, Any]:
    content = item.content if isinstance(item.content, str) else "".join(p.text for p in item.content)
    return {"role": _ROLES.get(item.role, item.role), "content": content}


def input_messages(req: ResponsesRequest) -> list[dict[str, Any]]:
    """Input items as chat-template messages: function calls join the assistant turn they follow,
    their outputs become tool messages, reasoning the assistant's reasoning_content."""
    if isinstance(req.input, str):
        return [{"role": "user", "content": req.input}]
    out: list[dict[str, Any]] = []
    for item in req.input:
        if isinstance(item, MessageItem):
            out.append(_message(item))
        elif isinstance(item, FunctionCallItem):
            call = {"id": item.call_id, "type": "function",
                    "function": {"name": item.name, "arguments": arguments_object(item.arguments)}}
            _assistant_turn(out)["tool_calls"] = [*_assistant_turn(out).get("tool_calls", []), call]
        elif isinstance(item, FunctionCallOutputItem):
            output = item.output if isinstance(item.output, str) else "".join(
                p.get("text", "") for p in item.output if isinstance(p, dict))
            out.append({"role": "tool", "tool_call_id": item.call_id, "content": output})
        elif isinstance(item, ReasoningItem):
            text = "".join(p.get("text", "") for p in item.content or [] if isinstance(p, dict))
            if text:
                out.append({"role": "assistant", "content": "", "reasoning_content": text})
    return out


def _assistant_turn(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant message a function call belongs to (a new one unless the last is one)."""
    if not messages or messages[-1]["role"] != "assistant":
        messages.append({"role": "assistant", "content": ""})
    return messages[-1]


def conversation(req: ResponsesRequest, previous: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """The earlier turns (from previous_response_id) followed by this request's input."""
    return [*previous, *input_messages(req)]


def chat_plan(req: ResponsesRequest, formats: ModelFormats) -> ChatPlan:
    tools = responses_tools(req.tools)
    fmt = responses_text_format(req.text.format.model_dump() if req.text and req.text.format else None)
    kwargs: dict[str, Any] = {}
    if req.reasoning and req.reasoning.effort:
        kwargs |= {"reasoning_effort": req.reasoning.effort, "enable_thinking": req.reasoning.effort != "none"}
    return make_plan(formats, tools, openai_choice(req.tool_choice, tools), fmt, template_kwargs=kwargs,
                     parallel=req.parallel_tool_calls is True)


def prompt_tokens(tokenizer: Any, req: ResponsesRequest, messages: list[dict[str, Any]],
                  formats: ModelFormats | None = None) -> tuple[list[int], ChatPlan, bool]:
    """Instructions apply to this request only: they are not carried to the next one."""
    formats = formats or ModelFormats()
    plan = chat_plan(req, formats)
    system = [{"role": "system", "content": req.instructions}] if req.instructions else []
    tokens, opens = render_plan(tokenizer, plan, formats, system + messages)
    return tokens, plan, opens


def sampling_params(req: ResponsesRequest) -> SamplingParams:
    return SamplingParams(
        max_tokens=req.max_output_tokens,
        temperature=1.0 if req.temperature is None else req.temperature,
        top_p=1.0 if req.top_p is None else req.top_p,
    )


def usage_body(usage: Usage, reasoning_tokens: int = 0) -> dict:
    return {"input_tokens": usage.prompt_tokens,
            "input_tokens_details": {"cached_tokens": usage.cached_tokens},
            "output_tokens": usage.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
            "total_tokens": usage.total_tokens}


def outcome(reason: FinishReason) -> tuple[str, dict | None]:
    """The response's (status, incomplete_details) for how the generation ended."""
    if reason is FinishReason.STOP:
        return "completed", None
    if reason is FinishReason.LENGTH:
        return "incomplete", {"reason": "max_output_tokens"}
    raise UnavailableError(f"the generation was stopped early ({reason.value})")


def finished_body(draft: ResponseDraft, reason: FinishReason, result: SplitResult, usage: Usage,
                  items: list[dict] | None = None) -> dict:
    """The finished response; ``items`` are the streamed output items, when it was streamed."""
    status, incomplete = outcome(reason)
    return draft.body(status, items if items is not None else output_items(draft, result, status),
                      usage_body(usage), incomplete)


def with_reply(messages: list[dict[str, Any]], result: SplitResult) -> tuple[dict[str, Any], ...]:
    """The conversation to store: what was sent plus the assistant's answer and calls."""
    reply: dict[str, Any] = {"role": "assistant", "content": result.content or ""}
    if result.reasoning:
        reply["reasoning_content"] = result.reasoning
    if result.calls:
        reply["tool_calls"] = [{"id": c.id, "type": "function",
                                "function": {"name": c.name, "arguments": arguments_object(c.arguments)}}
                               for c in result.calls]
    return (*messages, reply)
