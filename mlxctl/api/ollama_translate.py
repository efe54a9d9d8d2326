"""Ollama requests -> the OpenAI chat request the server already knows how to run.

An /api/chat body becomes a :class:`ChatCompletionRequest` (messages, tools, ``format`` as
``response_format``, ``think`` as the chat template's ``enable_thinking`` or a reasoning effort,
``options`` as the sampling fields), so the chat template, tool and reasoning plans and the
structured output are the OpenAI endpoint's own (``openai_translate.chat_jobs``). An
/api/generate body is one user turn (after its ``system``), or with ``raw`` (or a ``template``)
the prompt text as it is. Ollama's length options, which OpenAI has no field for, are applied
to the job's SamplingParams afterwards (:func:`length_params`).
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from mlxctl.api.chat_plan import ChatPlan, ModelFormats, with_plan
from mlxctl.api.ollama_models import OllamaChatRequest, OllamaGenerateRequest, OllamaMessage, OllamaOptions
from mlxctl.api.openai_models import ChatCompletionRequest
from mlxctl.api.openai_translate import Job, chat_params, chat_plan
from mlxctl.api.prompt import encode_text
from mlxctl.api.sampling_defaults import SamplingDefaults
from mlxctl.engine.sampling import SamplingParams
from mlxctl.errors import BadInputError

_RENAMED = {"repeat_penalty": "repetition_penalty"}
_SAMPLING = ("temperature", "top_p", "top_k", "min_p", "seed", "stop", "repeat_penalty", "presence_penalty",
             "frequency_penalty", "num_draft_tokens")


def chat_request(body: OllamaChatRequest, reasoning: str | None) -> ChatCompletionRequest:
    """``reasoning``: the model's reasoning format (None: it does not think)."""
    messages = [_message(i, m, body.messages) for i, m in enumerate(body.messages)]
    return _openai(body, messages, reasoning, tools=body.tools, tool_choice=body.tool_choice)


def generate_request(body: OllamaGenerateRequest, reasoning: str | None) -> ChatCompletionRequest:
    """The prompt as one user turn, after the ``system`` prompt when one is given."""
    turns = [{"role": "system", "content": body.system}] if body.system else []
    turns.append({"role": "user", "content": _content(body.prompt, body.images)})
    return _openai(body, turns, reasoning)


def raw_job(body: OllamaGenerateRequest, tokenizer: Any, formats: ModelFormats,
            defaults: SamplingDefaults) -> tuple[Job, ChatPlan]:
    """/api/generate with ``raw`` (the prompt as it is) or a ``template`` (rendered here, not by
    the model's chat template)."""
    if body.raw and (body.system or body.template):
        field = "system" if body.system else "template"
        raise BadInputError(f"{field}: a raw prompt is sent as it is; leave out {field}", param=field)
    if body.images:
        raise BadInputError("images: a raw or templated prompt has no image placeholders; send it without "
                            "raw and template", param="images")
    text = render_template(body.template, body.system, body.prompt) if body.template else body.prompt
    request = generate_request(body, formats.reasoning_parser)
    plan = chat_plan(request, formats)
    tokens = encode_text(tokenizer, text)
    opens = False
    if plan.reasoning_parser is not None:
        from mlxctl.api.reasoning import prompt_opens_reasoning

        opens = prompt_opens_reasoning(plan.reasoning_parser, text[-200:])
    return Job(0, tokens, with_plan(chat_params(request, defaults), plan, opens), reasoning_open=opens), plan


def with_context(job: Job, context: list[int] | None, vocab_size: int) -> Job:
    """An earlier exchange's token ids (``context``) before the prompt, as Ollama prepends them."""
    if not context:
        return job
    bad = [t for t in context if not 0 <= t < vocab_size]
    if bad:
        raise BadInputError(f"context: token id {bad[0]} is out of range: the vocabulary has {vocab_size} ids",
                            param="context")
    return dataclasses.replace(job, tokens=[*context, *job.tokens])


def _openai(body: OllamaChatRequest | OllamaGenerateRequest, messages: list[dict], reasoning: str | None,
            tools: Any = None, tool_choice: Any = None) -> ChatCompletionRequest:
    fields: dict[str, Any] = {"model": body.model, "messages": messages, "stream": False,
                              **sampling_fields(body.options)}
    if tools:
        fields["tools"] = tools
    if tool_choice is not None:  # an mlxctl extension: Ollama has no way to force a call
        fields["tool_choice"] = tool_choice
    if (fmt := response_format(body.format)) is not None:
        fields["response_format"] = fmt
    fields |= think_fields(body.think, reasoning)
    return ChatCompletionRequest.model_validate(fields)


def sampling_fields(options: OllamaOptions | None) -> dict[str, Any]:
    """The OpenAI/vLLM sampling fields of Ollama's ``options`` (the length ones: length_params)."""
    if options is None:
        return {}
    if options.repeat_penalty is not None and options.repeat_last_n not in (None, -1):
        raise BadInputError("options.repeat_last_n: mlxctl's repeat penalty covers the whole context; "
                            "only -1 is accepted", param="options.repeat_last_n")
    return {_RENAMED.get(name, name): getattr(options, name) for name in _SAMPLING
            if getattr(options, name) is not None}


def response_format(fmt: Any) -> dict | None:
    """``format``: "json" is any JSON object, an object is the JSON schema the answer follows."""
    if fmt in (None, ""):
        return None
    if fmt == "json":
        return {"type": "json_object"}
    return {"type": "json_schema", "json_schema": {"name": "format", "schema": fmt, "strict": True}}


def think_fields(think: Any, reasoning: str | None) -> dict[str, Any]:
    """``think``: true or a level turns the model's thinking on, false off; unset, the template's
    default. A model without a reasoning format cannot be asked to think."""
    if think is None:
        return {}
    if think is not False and reasoning is None:
        raise BadInputError("think: this model does not think (it has no reasoning format; "
                            "serve --reasoning-parser names one)", param="think")
    if isinstance(think, str):
        return {"reasoning_effort": think}
    return {"chat_template_kwargs": {"enable_thinking": think}}


def _message(index: int, message: OllamaMessage, history: list[OllamaMessage]) -> dict:
    out: dict[str, Any] = {"role": message.role, "content": _content(message.content, message.images, index)}
    if message.images and message.role != "user":
        raise BadInputError(f"messages.{index}.images: images are only allowed in user messages",
                            param=f"messages.{index}.images")
    if message.thinking and message.role == "assistant":
        out["reasoning_content"] = message.thinking
    if message.tool_calls:
        out["tool_calls"] = [{"id": _call_id(index, j), "type": "function",
                              "function": {"name": c.function.name, "arguments": json.dumps(c.function.arguments)}}
                             for j, c in enumerate(message.tool_calls)]
    if message.role == "tool":
        out["tool_call_id"] = _answered_call(index, message, history)
        if message.tool_name:
            out["name"] = message.tool_name
    return out


def _content(text: str, images: list[str] | None, index: int = 0) -> Any:
    """Text, or text then one image part per image (the placeholders; the images load apart)."""
    if not images:
        return text
    parts: list[dict] = [{"type": "text", "text": text}] if text else []
    return parts + [{"type": "image_url", "image_url": {"url": f"ollama:messages.{index}.images.{j}"}}
                    for j in range(len(images))]


def _call_id(message: int, call: int) -> str:
    return f"call_{message}_{call}"


def _answered_call(index: int, message: OllamaMessage, history: list[OllamaMessage]) -> str:
    """The id of the latest earlier call to ``tool_name`` (Ollama's tool turns name the tool,
    not the call), else of the latest call."""
    for i in range(index - 1, -1, -1):
        calls = history[i].tool_calls or []
        for j in range(len(calls) - 1, -1, -1):
            if message.tool_name in (None, calls[j].function.name):
                return _call_id(i, j)
    return f"call_tool_{index}"


def length_params(params: SamplingParams, options: OllamaOptions | None, prompt_tokens: int,
                  context_length: int) -> SamplingParams:
    """``num_predict`` (-1 / -2: until the context is full) and ``num_ctx`` (the window the prompt
    and the output share: at most the model's context, refused beyond it)."""
    if options is None:
        return params
    if options.num_predict is not None:
        limited = options.num_predict > 0
        params = dataclasses.replace(params, max_tokens=options.num_predict if limited else None,
                                     max_tokens_field="options.num_predict" if limited else None)
    if options.num_ctx is None:
        return params
    if options.num_ctx > context_length:
        raise BadInputError(f"options.num_ctx is {options.num_ctx}, but the model's context is {context_length} "
                            "tokens", param="options.num_ctx")
    room = options.num_ctx - prompt_tokens
    if room < 1:
        raise BadInputError(f"the prompt is {prompt_tokens} tokens, which leaves no room for output in "
                            f"options.num_ctx ({options.num_ctx})", param="options.num_ctx")
    if params.max_tokens is None or params.max_tokens > room:
        params = dataclasses.replace(params, max_tokens=room, max_tokens_field=None)
    return params


_TEMPLATE_TAG = re.compile(r"{{-?\s*(.*?)\s*-?}}", re.S)
_IF_SYSTEM = re.compile(r"{{-?\s*if\s+\.System\s*-?}}(.*?){{-?\s*end\s*-?}}", re.S)


def render_template(template: str, system: str, prompt: str) -> str:
    """An Ollama (Go) ``template`` with ``{{ .System }}``, ``{{ .Prompt }}``, ``{{ if .System }}
    ... {{ end }}`` and ``{{ .Response }}`` (where the answer starts: what follows is dropped);
    any other action is refused, naming it."""
    text = _IF_SYSTEM.sub(lambda m: m.group(1) if system else "", template)
    values = {".System": system, ".Prompt": prompt}

    def action(match: re.Match) -> str:
        name = match.group(1)
        if name not in values:
            raise BadInputError(f"template: {{{{ {name} }}}} is not supported (only .System, .Prompt, "
                                ".Response and if .System)", param="template")
        return values[name]

    head = re.split(r"{{-?\s*\.Response\s*-?}}", text, maxsplit=1)[0]
    return _TEMPLATE_TAG.sub(action, head)
