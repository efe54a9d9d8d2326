"""Anthropic Messages <-> engine: prompt tokens, sampling parameters, stop reasons, usage.

The only module that speaks both the Anthropic wire vocabulary and the engine's.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from mlxctl.api.anthropic_models import (
    CountTokensRequest,
    ImageBlock,
    Message,
    MessagesRequest,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from mlxctl.api.chat_plan import (
    ChatPlan,
    ModelFormats,
    OutputFormat,
    anthropic_choice,
    anthropic_tools,
    make_plan,
)
from mlxctl.api.chat_request import ChatRequest, render_chat_prompt
from mlxctl.api.chat_split import SplitResult, arguments_object
from mlxctl.engine.events import FinishReason, Usage
from mlxctl.api.sampling_defaults import NO_DEFAULTS, SamplingDefaults
from mlxctl.engine.sampling import SamplingParams
from mlxctl.errors import BadInputError, UnavailableError
from mlxctl.vision import NO_IMAGES
from mlxctl.vision.fetch import ImageRef
from mlxctl.vision.images import ImageError


def new_message_id() -> str:
    return f"msg_{uuid.uuid4().hex[:24]}"


def _text_of(content: str | list | None, where: str, image_token: str | None = None) -> str:
    """Text blocks joined; image blocks as the model's image placeholder (None: refused)."""
    if content is None or isinstance(content, str):
        return content or ""
    if image_token is None and any(isinstance(block, ImageBlock) for block in content):
        raise BadInputError(f"{where}: {NO_IMAGES}")
    return "\n".join(image_token if isinstance(block, ImageBlock) else block.text
                     for block in content if isinstance(block, (TextBlock, ImageBlock)))


def image_refs(req: CountTokensRequest) -> list[ImageRef]:
    """The request's image blocks in prompt order, each naming its field (``base64`` and ``url``
    sources; images go in user messages)."""
    refs = []
    for i, message in enumerate(req.messages):
        for j, block in enumerate(message.content if isinstance(message.content, list) else ()):
            if isinstance(block, ImageBlock):
                where = f"messages.{i}.content.{j}.source"
                if message.role != "user":
                    raise ImageError(where, "image blocks belong in user messages")
                refs.append(_image_ref(block.source, where))
    return refs


def _image_ref(source: dict[str, Any], where: str) -> ImageRef:
    kind = source.get("type")
    if kind == "base64":
        if not isinstance(source.get("data"), str) or not isinstance(source.get("media_type"), str):
            raise ImageError(where, "a base64 image source needs media_type and data strings")
        return ImageRef(where, data=source["data"], media_type=source["media_type"])
    if kind == "url":
        if not isinstance(source.get("url"), str) or not source["url"]:
            raise ImageError(where, "a url image source needs a url string")
        return ImageRef(where, url=source["url"])
    raise ImageError(f"{where}.type", f"image sources of type {kind!r} are not supported (use base64 or url)")


def _system_text(req: CountTokensRequest) -> str | None:
    if req.system is None or isinstance(req.system, str):
        return req.system or None
    return "\n".join(block.text for block in req.system) or None


def _chat_messages_of(message: Message, index: int, image_token: str | None = None) -> list[dict[str, Any]]:
    """One Anthropic message as chat-template messages: tool results become tool messages,
    tool_use blocks the assistant's tool_calls, thinking blocks its reasoning_content, image
    blocks the model's image placeholder."""
    where = f"messages.{index}.content"
    if isinstance(message.content, str):
        return [{"role": message.role, "content": message.content}]
    results = [b for b in message.content if isinstance(b, ToolResultBlock)]
    if results and message.role != "user":
        raise BadInputError(f"{where}: tool_result blocks belong in user messages")
    out: list[dict[str, Any]] = [{"role": "tool", "tool_call_id": b.tool_use_id,
                                  "content": ("Error: " if b.is_error else "") + _text_of(b.content, where)}
                                 for b in results]
    rest = [b for b in message.content if not isinstance(b, ToolResultBlock)]
    uses = [b for b in rest if isinstance(b, ToolUseBlock)]
    if uses and message.role != "assistant":
        raise BadInputError(f"{where}: tool_use blocks belong in assistant messages")
    if not rest and results:
        return out
    turn: dict[str, Any] = {"role": message.role, "content": _text_of(rest, where, image_token)}
    thinking = "".join(b.thinking for b in rest if isinstance(b, ThinkingBlock))
    if thinking:
        turn["reasoning_content"] = thinking
    if uses:
        turn["tool_calls"] = [{"id": b.id, "type": "function", "function": {"name": b.name, "arguments": b.input}}
                              for b in uses]
    return out + [turn]


def chat_messages(req: CountTokensRequest, image_token: str | None = None) -> list[dict[str, Any]]:
    """The conversation as chat-template messages, the system prompt first (system messages of
    ``messages`` where they stand: ``render_with_systems`` merges them where the template needs)."""
    system = _system_text(req)
    head = [{"role": "system", "content": system}] if system else []
    return head + [m for i, msg in enumerate(req.messages) for m in _chat_messages_of(msg, i, image_token)]


def chat_plan(req: CountTokensRequest, formats: ModelFormats) -> ChatPlan:
    tools = anthropic_tools(req.tools)
    fmt = req.output_format or (req.output_config.format if req.output_config else None)
    if req.output_format and req.output_config and req.output_config.format:
        raise BadInputError("give output_config.format or output_format, not both")
    output = None
    if fmt is not None:
        if fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict):
            raise BadInputError("output_config.format must be {\"type\": \"json_schema\", \"schema\": {...}}")
        output = OutputFormat("json_schema", json.dumps(fmt["schema"]), True)
    kwargs: dict[str, Any] = {}
    budget = None
    if req.thinking is not None:
        kwargs["enable_thinking"] = req.thinking.type != "disabled"
        if req.thinking.type == "enabled":
            if formats.reasoning_parser is None:
                raise BadInputError("thinking was enabled, but this model has no reasoning format")
            budget = req.thinking.budget_tokens
    if req.output_config and req.output_config.effort:
        kwargs["reasoning_effort"] = req.output_config.effort
    return make_plan(formats, tools, anthropic_choice(req.tool_choice, tools), output,
                     template_kwargs=kwargs, thinking_budget=budget)


def prompt_tokens(tokenizer: Any, req: CountTokensRequest, formats: ModelFormats | None = None, *,
                  image_token: str | None = None) -> list[int]:
    """The prompt's token ids (what count_tokens counts). Images are one ``image_token`` each (the
    engine expands them; None: a text-only model, which refuses them)."""
    formats = formats or ModelFormats()
    messages, prefill = _with_prefill(chat_messages(req, image_token))
    return render_chat_prompt(tokenizer, formats, chat_plan(req, formats), messages, prefill)[0]


def chat_request(req: MessagesRequest, formats: ModelFormats, *, image_token: str | None = None,
                 defaults: SamplingDefaults = NO_DEFAULTS, images: tuple = ()) -> ChatRequest:
    """A final assistant message (text only) is a prefill the reply continues."""
    messages, prefill = _with_prefill(chat_messages(req, image_token))
    return ChatRequest(messages, chat_plan(req, formats), sampling_params(req, defaults), prefill, images)


def _with_prefill(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    if messages[-1]["role"] == "assistant" and not messages[-1].get("tool_calls"):
        return messages[:-1], messages[-1]["content"]
    return messages, ""


def sampling_params(req: MessagesRequest, defaults: SamplingDefaults = NO_DEFAULTS) -> SamplingParams:
    """max_tokens is required here, so ``defaults`` give only the sampling fields omitted."""
    given = {"temperature": req.temperature, "top_p": req.top_p, "top_k": req.top_k}
    return SamplingParams(
        max_tokens=req.max_tokens, max_tokens_field="max_tokens",
        **{**defaults.sampling(), **{k: v for k, v in given.items() if v is not None}},
        stop=tuple(req.stop_sequences or ()), num_draft_tokens=req.num_draft_tokens,
    )


def stop_reason(reason: FinishReason, stop_string: str | None, called: bool = False) -> tuple[str, str | None]:
    """Anthropic's (stop_reason, stop_sequence) for a finished generation."""
    if reason is FinishReason.LENGTH:
        return "max_tokens", None
    if reason is not FinishReason.STOP:
        raise UnavailableError(f"the generation was stopped early ({reason.value})")
    if called:
        return "tool_use", None
    return ("stop_sequence", stop_string) if stop_string is not None else ("end_turn", None)


def usage_body(input_tokens: int, output_tokens: int, cache_read: int = 0) -> dict[str, int]:
    """Anthropic counts prompt tokens read from the cache apart from the rest of the input."""
    return {"input_tokens": input_tokens - cache_read, "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": cache_read}


def content_blocks(result: SplitResult) -> list[dict]:
    """thinking, then text, then tool_use blocks (a text block even when empty, if nothing else)."""
    blocks: list[dict] = []
    if result.reasoning:
        blocks.append({"type": "thinking", "thinking": result.reasoning, "signature": ""})
    if result.content or not (result.calls or result.reasoning):
        blocks.append({"type": "text", "text": result.content or ""})
    blocks += [{"type": "tool_use", "id": tool_use_id(c.id), "name": c.name, "input": arguments_object(c.arguments)}
               for c in result.calls]
    return blocks


def tool_use_id(call_id: str) -> str:
    """Anthropic's id style for a parser's call id."""
    return "toolu_" + call_id.removeprefix("call_")


def message_body(message_id: str, model: str, result: SplitResult, stop: tuple[str, str | None], usage: Usage) -> dict:
    """The non-streamed response."""
    return {
        "id": message_id, "type": "message", "role": "assistant", "model": model,
        "content": content_blocks(result),
        "stop_reason": stop[0], "stop_sequence": stop[1],
        "usage": usage_body(usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens),
    }
