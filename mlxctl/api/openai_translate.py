"""OpenAI requests -> engine jobs: the model check, prompt tokens and SamplingParams per choice.

A request with ``n`` choices (and, for completions, several prompts) becomes one :class:`Job` per
choice; choice ``index`` is ``prompt_number * n + choice_number``, as OpenAI numbers them. With a
seed, choice ``c`` samples with ``seed + c``, so choices differ but the whole response repeats.

Image parts (vision models) are rendered into the message text as the model's image placeholder
(one per image, where the part stands); the images themselves travel with the job, in the same
order, and the engine expands each placeholder to the image's feature positions. A video part
stands for its sampled frames: one labelled placeholder per frame ("Frame at 1 s: <image>"),
each frame an image of the job.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

from mlxctl.api.chat_plan import (
    ChatPlan,
    ModelFormats,
    make_plan,
    openai_choice,
    openai_response_format,
    openai_tools,
    structured_outputs,
)
from mlxctl.api.chat_request import ChatRequest, Job, prepare_chat
from mlxctl.api.chat_split import arguments_object
from mlxctl.api.openai_models import (
    ChatCompletionRequest,
    ChatMessage,
    CompletionRequest,
    ImagePart,
    SamplingFields,
    TextPart,
    VideoPart,
)
from mlxctl.api.prompt import encode_text
from mlxctl.api.sampling_defaults import NO_DEFAULTS, SamplingDefaults
from mlxctl.engine.kv.media import cache_salt
from mlxctl.engine.sampling import SamplingParams
from mlxctl.errors import BadInputError
from mlxctl.vision import NO_IMAGES
from mlxctl.vision.fetch import ImageRef, VideoSource
from mlxctl.vision.sampling import VideoSampling
from mlxctl.vision.video import VideoInput, video_prompt


def chat_jobs(body: ChatCompletionRequest, tokenizer: Any, formats: ModelFormats | None = None, *,
              images: Sequence[Any] = (), image_token: str | None = None,
              defaults: SamplingDefaults = NO_DEFAULTS) -> tuple[list[Job], ChatPlan]:
    """``images``: the request's images and videos (see ``chat_media_refs``), loaded;
    ``image_token``: the model's image placeholder text (None: a text-only model, which refuses
    image and video parts); ``defaults``: what omitted sampling fields take."""
    prepared = prepare_chat(tokenizer, formats, chat_request(body, formats or ModelFormats(), images=images,
                                                             image_token=image_token, defaults=defaults))
    job = prepared.job()
    return [dataclasses.replace(job, index=c, params=choice_params(job.params, c)) for c in range(body.n)], prepared.plan


def chat_request(body: ChatCompletionRequest, formats: ModelFormats, *, images: Sequence[Any] = (),
                 image_token: str | None = None, defaults: SamplingDefaults = NO_DEFAULTS) -> ChatRequest:
    videos = iter([m for m in images if isinstance(m, VideoInput)])
    return ChatRequest([template_message(m, image_token, videos) for m in body.messages], chat_plan(body, formats),
                       chat_params(body, defaults), images=image_inputs(images), cache_salt=cache_salt(salt=body.cache_salt))


def image_inputs(media: Sequence[Any]) -> tuple:
    """One image per placeholder, in order: an image as itself, a video as its frames."""
    return tuple(frame for m in media for frame in (m.frames if isinstance(m, VideoInput) else (m,)))


def chat_media_refs(body: ChatCompletionRequest) -> list[ImageRef | VideoSource]:
    """The request's image and video parts in prompt order, each with the field it came from."""
    return [_media_ref(part, f"messages.{i}.content.{j}", body)
            for i, message in enumerate(body.messages) if isinstance(message.content, list)
            for j, part in enumerate(message.content) if isinstance(part, (ImagePart, VideoPart))]


def _media_ref(part: ImagePart | VideoPart, where: str, body: ChatCompletionRequest) -> ImageRef | VideoSource:
    if isinstance(part, ImagePart):
        return ImageRef(f"{where}.image_url.url", url=part.image_url.url)
    return VideoSource(f"{where}.video_url.url", part.video_url.url, video_sampling(part, body))


def video_sampling(part: VideoPart, body: ChatCompletionRequest) -> VideoSampling:
    """The part's own fps / max_frames, else the request's, else mm_processor_kwargs', else the
    defaults (vision/sampling.py)."""
    extra, default = body.mm_processor_kwargs, VideoSampling()

    def pick(name: str) -> Any:
        for value in (getattr(part.video_url, name), getattr(body, name), getattr(extra, name, None)):
            if value is not None:
                return value
        return getattr(default, name)

    return VideoSampling(pick("fps"), pick("max_frames"))


def chat_plan(body: ChatCompletionRequest, formats: ModelFormats) -> ChatPlan:
    tools = openai_tools(body.tools)
    fmt = openai_response_format(body.response_format)
    extra = structured_outputs(body.structured_outputs)
    if fmt is not None and extra is not None:
        raise BadInputError("give response_format or structured_outputs, not both")
    kwargs = dict(body.chat_template_kwargs or {})
    if body.reasoning_effort is not None:
        kwargs.setdefault("reasoning_effort", body.reasoning_effort)
        kwargs.setdefault("enable_thinking", body.reasoning_effort != "none")
    return make_plan(formats, tools, openai_choice(body.tool_choice, tools), fmt or extra,
                     template_kwargs=kwargs, thinking_budget=body.thinking_budget,
                     parallel=body.parallel_tool_calls is True)


def completion_jobs(body: CompletionRequest, tokenizer: Any, vocab_size: int,
                    defaults: SamplingDefaults = NO_DEFAULTS) -> list[Job]:
    prompts = [_prompt(p, tokenizer, vocab_size, body.echo) for p in prompt_list(body.prompt)]
    salt = cache_salt(salt=body.cache_salt)
    return [dataclasses.replace(j, cache_salt=salt) for j in fan_out(prompts, completion_params(body, defaults), body.n)]


def fan_out(prompts: list[tuple[list[int], str]], params: SamplingParams, n: int) -> list[Job]:
    return [Job(p * n + c, tokens, choice_params(params, c), echo)
            for p, (tokens, echo) in enumerate(prompts) for c in range(n)]


def choice_params(params: SamplingParams, choice: int) -> SamplingParams:
    return params if params.seed is None else dataclasses.replace(params, seed=params.seed + choice)


def template_message(message: ChatMessage, image_token: str | None = None,
                     videos: Iterator[VideoInput] | None = None) -> dict[str, Any]:
    """A message as chat templates expect it (developer -> system, text parts joined, image parts
    as ``image_token``, video parts as their frames (the next of ``videos``), a call's arguments
    as an object, as Hugging Face templates read them)."""
    out: dict[str, Any] = {"role": "system" if message.role == "developer" else message.role,
                           "content": message_text(message.content, image_token, videos)}
    if message.name:
        out["name"] = message.name
    if message.tool_calls:
        out["tool_calls"] = [{"id": c.id, "type": "function",
                              "function": {"name": c.function.name, "arguments": arguments_object(c.function.arguments)}}
                             for c in message.tool_calls]
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    reasoning = message.reasoning_content or message.reasoning
    if reasoning:
        out["reasoning_content"] = reasoning  # used only by templates that render it
    return out


def message_text(content: Any, image_token: str | None = None, videos: Iterator[VideoInput] | None = None) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if image_token is None and not all(isinstance(part, TextPart) for part in content):
        raise BadInputError(NO_IMAGES)
    return "\n".join(_part_text(part, image_token, videos) for part in content)


def _part_text(part: Any, image_token: str | None, videos: Iterator[VideoInput] | None) -> str:
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, ImagePart):
        return image_token
    video = next(videos, None) if videos is not None else None
    if video is None:
        raise BadInputError("a video_url part came without its decoded video")
    return video_prompt(video, image_token)


def prompt_list(prompt: Any) -> list[str | list[int]]:
    """The prompts of a completions request: a string, token ids, or a list of either."""
    if isinstance(prompt, str) or (prompt and isinstance(prompt[0], int)):
        return [prompt]
    if not prompt:
        raise BadInputError("the prompt is empty", param="prompt")
    return list(prompt)


def _prompt(prompt: str | list[int], tokenizer: Any, vocab_size: int, echo: bool) -> tuple[list[int], str]:
    if isinstance(prompt, str):
        return encode_text(tokenizer, prompt), prompt if echo else ""
    bad = [t for t in prompt if t >= vocab_size]
    if bad:
        raise BadInputError(f"prompt token id {bad[0]} is out of range: the vocabulary has {vocab_size} ids")
    return list(prompt), tokenizer.decode(prompt) if echo else ""


def chat_params(body: ChatCompletionRequest, defaults: SamplingDefaults = NO_DEFAULTS) -> SamplingParams:
    max_tokens = body.max_completion_tokens or body.max_tokens  # None: the default cap, else the context
    if max_tokens is None:
        return _params(body, defaults.max_tokens, body.logprobs, body.top_logprobs or 0, field=None, defaults=defaults)
    field = "max_completion_tokens" if body.max_completion_tokens else "max_tokens"
    return _params(body, max_tokens, body.logprobs, body.top_logprobs or 0, field=field, defaults=defaults)


def completion_params(body: CompletionRequest, defaults: SamplingDefaults = NO_DEFAULTS) -> SamplingParams:
    given = "max_tokens" in body.model_fields_set  # OpenAI's default of 16 is capped to the context
    max_tokens = body.max_tokens if given else _first(defaults.max_tokens, body.max_tokens)
    return _params(body, max_tokens, body.logprobs is not None, body.logprobs or 0,
                   field="max_tokens" if given else None, defaults=defaults)


def _first(value: Any, fallback: Any) -> Any:
    return fallback if value is None else value


def _params(body: SamplingFields, max_tokens: int | None, logprobs: bool, top: int, *,
            field: str | None, defaults: SamplingDefaults) -> SamplingParams:
    """``field``: the request field max_tokens was given as (None: a default, capped to the context)."""
    params = SamplingParams(
        max_tokens=max_tokens, max_tokens_field=field, logprobs=logprobs, top_logprobs=top,
        **{**defaults.sampling(), **_sampling(body)},
        logit_bias={int(k): v for k, v in (body.logit_bias or {}).items()},
        stop=body.stop or (), stop_token_ids=tuple(body.stop_token_ids or ()), ignore_eos=body.ignore_eos,
        skip_special_tokens=body.skip_special_tokens, num_draft_tokens=body.num_draft_tokens,
    )
    params.validate()
    return params


def _sampling(body: SamplingFields) -> dict[str, Any]:
    given = {
        "temperature": body.temperature, "top_p": body.top_p, "min_p": body.min_p,
        "presence_penalty": body.presence_penalty, "frequency_penalty": body.frequency_penalty,
        "repetition_penalty": body.repetition_penalty, "seed": body.seed,
        "top_k": max(body.top_k, 0) if body.top_k is not None else None,
    }
    return {k: v for k, v in given.items() if v is not None}
