"""Responses API <-> engine: conversation, prompt tokens, sampling parameters, outcome, usage.

The only module that speaks both the Responses wire vocabulary and the engine's. A conversation is
a list of chat-template messages; ``previous_response_id`` prepends the stored one.

``input_image`` parts (vision models) become the model's image placeholder in the message text;
the loaded images ride along in the message under ``IMAGES`` (never shown to the template), so a
stored conversation keeps them and a follow-up turn sends them again, in order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from mlxctl.api.chat_plan import (
    ChatPlan,
    ModelFormats,
    make_plan,
    openai_choice,
    responses_text_format,
    responses_tools,
)
from mlxctl.api.chat_request import ChatRequest
from mlxctl.api.prompt import encode_text
from mlxctl.api.chat_split import SplitResult, arguments_object
from mlxctl.api.responses_models import (
    FunctionCallItem,
    FunctionCallOutputItem,
    InputImage,
    MessageItem,
    ReasoningItem,
    ResponsesRequest,
)
from mlxctl.api.responses_objects import ResponseDraft, output_items
from mlxctl.api.responses_tools import check_choice, joined_name, log_not_offered
from mlxctl.engine.events import FinishReason, Usage
from mlxctl.api.sampling_defaults import NO_DEFAULTS, SamplingDefaults
from mlxctl.engine.sampling import SamplingParams
from mlxctl.errors import BadInputError, UnavailableError
from mlxctl.vision import NO_IMAGES
from mlxctl.vision.fetch import ImageRef

_ROLES = {"developer": "system"}
IMAGES = "mlxctl_images"  # a message's loaded images (vision.images.ImageInput), in order


def image_refs(req: ResponsesRequest) -> list[ImageRef]:
    """The request's input_image parts in order, each with the field it came from."""
    items = req.input if isinstance(req.input, list) else []
    return [ImageRef(f"input.{i}.content.{j}.image_url", url=part.image_url)
            for i, item in enumerate(items) if isinstance(item, MessageItem) and isinstance(item.content, list)
            for j, part in enumerate(item.content) if isinstance(part, InputImage)]


def _message(item: MessageItem, image_token: str | None, images: Iterator[Any]) -> dict[str, Any]:
    role = _ROLES.get(item.role, item.role)
    if isinstance(item.content, str):
        return {"role": role, "content": item.content}
    if not any(isinstance(p, InputImage) for p in item.content):
        return {"role": role, "content": "".join(p.text for p in item.content)}
    if image_token is None:
        raise BadInputError(NO_IMAGES)
    mine = tuple(next(images) for p in item.content if isinstance(p, InputImage))
    text = "\n".join(image_token if isinstance(p, InputImage) else p.text for p in item.content)
    return {"role": role, "content": text, IMAGES: mine}


def input_messages(req: ResponsesRequest, images: Sequence[Any] = (), image_token: str | None = None) -> list[dict[str, Any]]:
    """Input items as chat-template messages: function calls join the assistant turn they follow,
    their outputs become tool messages, reasoning the reasoning_content of the assistant turn that
    its message and calls then join (as ``with_reply`` stores a turn). ``images``:
    the loaded input_image parts (see ``image_refs``); ``image_token``: the model's placeholder."""
    if isinstance(req.input, str):
        return [{"role": "user", "content": req.input}]
    out: list[dict[str, Any]] = []
    pending = iter(images)
    for item in req.input:
        if isinstance(item, MessageItem):
            message = _message(item, image_token, pending)
            if _thought_only(out) and message["role"] == "assistant":
                out[-1]["content"] = message["content"]  # the answer after its reasoning: one turn
            else:
                out.append(message)
        elif isinstance(item, FunctionCallItem):
            call = {"id": item.call_id, "type": "function",
                    "function": {"name": joined_name(item.namespace, item.name),
                                 "arguments": arguments_object(item.arguments)}}
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


def _thought_only(messages: list[dict[str, Any]]) -> bool:
    """The last message is an assistant turn that so far holds only reasoning."""
    last = messages[-1] if messages else None
    return (last is not None and last["role"] == "assistant" and bool(last.get("reasoning_content"))
            and not last["content"] and not last.get("tool_calls"))


def _assistant_turn(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant message a function call belongs to (a new one unless the last is one)."""
    if not messages or messages[-1]["role"] != "assistant":
        messages.append({"role": "assistant", "content": ""})
    return messages[-1]


def conversation(req: ResponsesRequest, previous: Sequence[dict[str, Any]] = (), images: Sequence[Any] = (),
                 image_token: str | None = None) -> list[dict[str, Any]]:
    """The earlier turns (from previous_response_id) followed by this request's input."""
    return [*previous, *input_messages(req, images, image_token)]


def conversation_images(messages: Sequence[dict[str, Any]]) -> tuple:
    """Every image of the conversation, in prompt order: one per image placeholder."""
    return tuple(image for m in messages for image in m.get(IMAGES, ()))


def chat_plan(req: ResponsesRequest, formats: ModelFormats) -> ChatPlan:
    tools = responses_tools(req.tools)
    check_choice(req.tool_choice)
    log_not_offered(req.tools)
    fmt = responses_text_format(req.text.format.model_dump() if req.text and req.text.format else None)
    kwargs: dict[str, Any] = {}
    if req.reasoning and req.reasoning.effort:
        kwargs |= {"reasoning_effort": req.reasoning.effort, "enable_thinking": req.reasoning.effort != "none"}
    choice = req.tool_choice
    if isinstance(choice, dict) and choice.get("namespace") and isinstance(choice.get("name"), str):
        choice = {**choice, "name": joined_name(choice["namespace"], choice["name"])}
    return make_plan(formats, tools, openai_choice(choice, tools), fmt, template_kwargs=kwargs,
                     parallel=req.parallel_tool_calls is True)


def chat_request(req: ResponsesRequest, messages: list[dict[str, Any]], formats: ModelFormats,
                 defaults: SamplingDefaults = NO_DEFAULTS) -> ChatRequest:
    """Instructions apply to this request only: they are not carried to the next one."""
    system = [{"role": "system", "content": req.instructions}] if req.instructions else []
    shown = [{k: v for k, v in m.items() if k != IMAGES} for m in messages]
    return ChatRequest(system + shown, chat_plan(req, formats), sampling_params(req, defaults),
                       images=conversation_images(messages))


def sampling_params(req: ResponsesRequest, defaults: SamplingDefaults = NO_DEFAULTS) -> SamplingParams:
    """No max_output_tokens (Codex sends none): the default cap, else up to the context."""
    given = {"temperature": req.temperature, "top_p": req.top_p}
    if req.max_output_tokens is None:
        limit = {"max_tokens": defaults.max_tokens, "max_tokens_field": None}
    else:
        limit = {"max_tokens": req.max_output_tokens, "max_tokens_field": "max_output_tokens"}
    return SamplingParams(**limit, **{**defaults.sampling(), **{k: v for k, v in given.items() if v is not None}})


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
                  items: list[dict] | None = None, tokenizer: Any = None) -> dict:
    """The finished response; ``items`` are the streamed output items, when it was streamed."""
    status, incomplete = outcome(reason)
    return draft.body(status, items if items is not None else output_items(draft, result, status),
                      usage_body(usage, reasoning_tokens(tokenizer, result, usage)), incomplete)


def reasoning_tokens(tokenizer: Any, result: SplitResult, usage: Usage) -> int:
    """Output tokens spent thinking: the reasoning text's tokens (its markers not counted)."""
    if not result.reasoning or tokenizer is None:
        return 0
    return min(len(encode_text(tokenizer, result.reasoning, special=False)), usage.completion_tokens)


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
