"""OpenAI request bodies (chat completions and legacy completions) as pydantic models.

Unknown fields are refused (``extra="forbid"``), so the 400 names them. Advisory fields that
clients send by habit (``user``, ``metadata``, ``store``, ``service_tier``, ...) are accepted and
have no effect. Fields we cannot honour yet are either left undeclared (refused as unknown) or
declared only to accept their no-op values; anything else is a 400 that names the field.
Tools, ``tool_choice``, ``response_format`` and reasoning are checked further in
``chat_plan.py``, which knows the model's formats.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from mlxctl.api.null_fields import NullMeansAbsent
from mlxctl.vision.sampling import MAX_FPS, MAX_FRAMES, VideoSampling

MAX_CHOICES = 64
TokenId = Annotated[int, Field(ge=0)]
# Ollama's keep_alive: seconds (a number) or a duration string; strict, so JSON true is not 1 s
KeepAlive = StrictInt | StrictFloat | StrictStr | None


class _Body(NullMeansAbsent):  # null for an optional field: absent
    model_config = ConfigDict(extra="forbid")


def _refuse(field: str, value: Any) -> None:
    raise ValueError(f"{field}={value!r} is not supported by mlxctl yet")


class StreamOptions(_Body):
    include_usage: bool = False
    include_obfuscation: bool | None = None  # advisory: chunks are never padded


class TextPart(_Body):
    type: Literal["text"]
    text: str


class ImageURL(_Body):
    url: str = Field(min_length=1)  # data:image/...;base64,..., http(s)://... or file://... (docs/vision.md)
    detail: Literal["auto", "low", "high"] | None = None  # advisory: the model's processor decides the size


class ImagePart(_Body):
    type: Literal["image_url"]
    image_url: ImageURL


Fps = Annotated[float, Field(gt=0, le=MAX_FPS)]
MaxFrames = Annotated[int, Field(ge=1, le=MAX_FRAMES)]


class VideoURL(_Body):
    """A video (docs/vision.md): sampled at ``fps`` frames a second, at most ``max_frames``
    frames; unset, the request's ``fps`` / ``max_frames`` (or ``mm_processor_kwargs``) apply."""

    url: str = Field(min_length=1)  # data:video/mp4;base64,..., http(s)://... or file://...
    fps: Fps | None = None
    max_frames: MaxFrames | None = None


class VideoPart(_Body):
    type: Literal["video_url"]
    video_url: VideoURL


class MediaKwargs(_Body):
    """vLLM's ``mm_processor_kwargs``, the frame sampling keys only."""

    fps: Fps | None = None
    max_frames: MaxFrames | None = None


ContentPart = Annotated[TextPart | ImagePart | VideoPart, Field(discriminator="type")]
_PART_TYPES = ("text", "image_url", "video_url")


def _check_part_sampling(video: Any, prefix: str) -> None:
    """A part's fps / max_frames, checked up front so the 400 names the part (the errors of the
    content's str | list union would name the wrong branch)."""
    if isinstance(video, dict) and (video.get("fps") is not None or video.get("max_frames") is not None):
        default = VideoSampling()
        fps, frames = video.get("fps"), video.get("max_frames")
        VideoSampling(default.fps if fps is None else fps, default.max_frames if frames is None else frames).check(prefix)


class CalledFunction(_Body):
    name: str
    arguments: str  # JSON text, as the API sends it


class MessageToolCall(_Body):
    id: str
    type: Literal["function"] = "function"
    function: CalledFunction

    @field_validator("function")
    @classmethod
    def _arguments_are_json(cls, value: CalledFunction) -> CalledFunction:
        import json

        from mlxctl.api.json_depth import JsonTooDeep, loads_bounded

        try:
            loads_bounded(value.arguments or "{}")
        except JsonTooDeep as exc:
            raise ValueError(f"function.arguments of {value.name!r}: {exc}") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"function.arguments of {value.name!r} is not valid JSON: {exc.msg}") from exc
        return value


class ChatMessage(_Body):
    """One message; ``developer`` is the newer name for ``system``."""

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    reasoning_content: str | None = None  # assistant only; both spellings are accepted
    reasoning: str | None = None
    refusal: Any = None  # only null: clients echo back our own assistant messages
    tool_calls: list[MessageToolCall] | None = None  # assistant only
    tool_call_id: str | None = None  # tool only
    function_call: Any = None
    audio: Any = None
    annotations: Any = None

    @field_validator("content", mode="before")
    @classmethod
    def _known_part_types(cls, value: Any) -> Any:
        for j, part in enumerate(value if isinstance(value, list) else ()):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind not in _PART_TYPES:
                raise ValueError(f"content parts of type {kind!r} are not supported: text, image_url and video_url only")
            if kind == "video_url":
                _check_part_sampling(part.get("video_url"), f"content.{j}.video_url.")
        return value

    @field_validator("refusal", "function_call", "audio", "annotations")
    @classmethod
    def _null_only(cls, value: Any, info: ValidationInfo) -> Any:
        if value not in (None, []):
            _refuse(info.field_name, value)
        return value

    @model_validator(mode="after")
    def _role_rules(self) -> ChatMessage:
        if self.role != "assistant" and self.content is None:
            raise ValueError(f"a {self.role} message needs content")
        if self.role != "assistant" and self.tool_calls:
            raise ValueError("tool_calls are only allowed on assistant messages")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs the tool_call_id it answers")
        if self.role != "tool" and self.tool_call_id is not None:
            raise ValueError("tool_call_id is only allowed on tool messages")
        if self.role != "assistant" and (self.reasoning_content or self.reasoning):
            raise ValueError("reasoning_content / reasoning are only allowed on assistant messages")
        if self.role != "user" and isinstance(self.content, list) \
                and any(isinstance(p, (ImagePart, VideoPart)) for p in self.content):
            raise ValueError("image_url and video_url parts are only allowed in user messages")
        return self


class SamplingFields(_Body):
    """Fields both endpoints share: the model, streaming, choices and sampling."""

    model: str
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(1, ge=1, le=MAX_CHOICES)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    logit_bias: dict[str, float] | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    user: str | None = None  # advisory
    # extensions (vLLM's names and meanings)
    top_k: int | None = Field(None, ge=-1)  # 0 or -1: off
    min_p: float | None = Field(None, ge=0, le=1)
    repetition_penalty: float | None = Field(None, gt=0, le=2)
    ignore_eos: bool = False
    stop_token_ids: list[TokenId] | None = None
    skip_special_tokens: bool = True
    keep_alive: KeepAlive = None  # Ollama's: how long the model stays loaded after this request
    cache_salt: str | None = Field(None, min_length=1)  # only requests with the same salt share cached prefixes
    num_draft_tokens: int | None = Field(None, ge=0, le=64)  # serve --speculative: this request's drafts (0: none)

    @field_validator("logit_bias")
    @classmethod
    def _bias_keys_are_token_ids(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        for key, bias in (value or {}).items():
            if not key.strip().isdigit():
                raise ValueError(f"keys must be token ids (integers as strings), got {key!r}")
            if not -100 <= bias <= 100:
                raise ValueError(f"bias for token {key} must be between -100 and 100, got {bias}")
        return value

    @field_validator("stream_options")
    @classmethod
    def _stream_options_need_stream(cls, value: StreamOptions | None, info: ValidationInfo) -> StreamOptions | None:
        if value is not None and not info.data.get("stream"):
            raise ValueError("stream_options is only allowed when stream is true")
        return value

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class ChatCompletionRequest(SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=20)
    # advisory
    metadata: dict[str, str] | None = None
    store: bool | None = None
    service_tier: str | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    # tools, structured output and reasoning (checked in chat_plan.py)
    tools: list[Any] | None = None
    tool_choice: Any = None
    parallel_tool_calls: bool | None = None  # several calls per turn are always allowed
    response_format: dict[str, Any] | None = None
    structured_outputs: dict[str, Any] | None = None  # vLLM extension: json | regex | grammar | choice
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high"] | None = None
    chat_template_kwargs: dict[str, Any] | None = None  # e.g. {"enable_thinking": false}
    thinking_budget: int | None = Field(None, ge=0)  # extension: thinking tokens before it is closed
    mcp: bool | None = None  # extension: run the tools of `serve --mcp-config` servers (docs/mcp.md)
    modalities: list[str] | None = None
    # video frame sampling (extensions; a part's own video_url.fps / max_frames come first)
    fps: Fps | None = None
    max_frames: MaxFrames | None = None
    mm_processor_kwargs: MediaKwargs | None = None  # vLLM's spelling of the same two

    @model_validator(mode="after")
    def _sampling_said_once(self) -> ChatCompletionRequest:
        extra = self.mm_processor_kwargs
        for name in ("fps", "max_frames"):
            if extra is not None and getattr(self, name) is not None and getattr(extra, name) is not None:
                raise ValueError(f"give {name} or mm_processor_kwargs.{name}, not both")
        return self

    @field_validator("modalities")
    @classmethod
    def _text_modality_only(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and value != ["text"]:
            _refuse("modalities", value)
        return value


PromptInput = str | list[str] | list[TokenId] | list[list[TokenId]]


class CompletionRequest(SamplingFields):
    prompt: PromptInput
    max_tokens: int | None = Field(16, ge=1)  # OpenAI's default for this endpoint
    echo: bool = False
    logprobs: int | None = Field(None, ge=0, le=20)
    best_of: int | None = Field(None, ge=1)
    suffix: str | None = None

    @field_validator("suffix")
    @classmethod
    def _no_suffix(cls, value: str | None) -> str | None:
        if value:
            raise ValueError("suffix (fill-in-the-middle) is not supported by mlxctl yet")
        return value

    @field_validator("best_of")
    @classmethod
    def _best_of_is_n(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value not in (None, info.data.get("n")):
            raise ValueError("best_of is not supported by mlxctl yet (only best_of equal to n)")
        return value

    @field_validator("logprobs")
    @classmethod
    def _no_prompt_logprobs(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and info.data.get("echo"):
            raise ValueError("logprobs with echo needs prompt logprobs, which mlxctl does not compute yet")
        return value
