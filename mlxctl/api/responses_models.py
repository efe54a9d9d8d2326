"""OpenAI Responses API request bodies (POST /v1/responses).

Unknown fields are rejected (``extra="forbid"``). Advisory fields (metadata, client_metadata, user,
service_tier, prompt caching hints, an ``include`` of data we never generate, ...) are accepted and
have no effect. Function and namespace tools, tool_choice,
reasoning and structured text formats are honoured (checked further in ``chat_plan.py``); hosted
tools are accepted and not offered, and listed as such (``responses_tools.py``); fields that would
change the output and that we cannot honour yet (background mode, ...) get a 400 that names them,
never silent loss.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mlxctl.api.null_fields import NullMeansAbsent


class _Strict(NullMeansAbsent):  # null for an optional field: absent
    model_config = ConfigDict(extra="forbid")


def _refuse_when_set(value: Any, what: str) -> Any:
    if value:
        raise ValueError(f"{what} not supported yet")
    return value


# `include` values naming data mlxctl never generates, so there is nothing to add: no encrypted
# reasoning (reasoning items carry their text; Codex asks for this on every request with
# store: false), no results of the hosted tools it refuses. Others (output logprobs, ...) are a 400.
NOTHING_TO_INCLUDE = ("reasoning.encrypted_content", "file_search_call.results", "web_search_call.results",
                      "web_search_call.action.sources", "code_interpreter_call.outputs",
                      "computer_call_output.output.image_url")


def _refuse_unknown_types(items: Any, known: tuple[str, ...], what: str) -> Any:
    for item in items if isinstance(items, list) else ():
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if kind not in known:
            raise ValueError(f"{what} of type {kind!r} are not supported yet (only {', '.join(known)})")
    return items


class InputText(_Strict):
    type: Literal["input_text"]
    text: str


class OutputText(_Strict):
    type: Literal["output_text"]
    text: str
    annotations: list[Any] = []
    logprobs: list[Any] | None = None


class InputImage(_Strict):
    """An image for a vision model (docs/vision.md): ``image_url`` is a URL or a data URL, as in
    chat. ``file_id`` needs a Files API mlxctl does not have."""

    type: Literal["input_image"]
    image_url: str = Field(min_length=1)  # checked in _check_images, with file_id
    file_id: None = None
    detail: Literal["auto", "low", "high"] | None = None  # advisory: the model's processor decides the size


ContentPart = Annotated[InputText | OutputText | InputImage, Field(discriminator="type")]


class MessageItem(_Strict):
    """A message input item; ``id`` and ``status`` appear when a past output item is sent back."""

    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: str | list[ContentPart]
    id: str | None = None
    status: str | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _known_parts(cls, value: Any) -> Any:
        return _refuse_unknown_types(value, ("input_text", "output_text", "input_image"), "content parts")


class FunctionCallItem(_Strict):
    """A function call the model made, sent back as input."""

    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str
    namespace: str | None = None  # a namespace tool's function (responses_tools)
    id: str | None = None
    status: str | None = None

    @field_validator("arguments")
    @classmethod
    def _not_too_deep(cls, value: str) -> str:
        """Invalid JSON is taken as no arguments, but JSON nested too deep to parse is a 400."""
        import json

        from mlxctl.api.json_depth import loads_bounded

        try:
            loads_bounded(value or "{}")
        except json.JSONDecodeError:
            pass
        return value


class FunctionCallOutputItem(_Strict):
    type: Literal["function_call_output"]
    call_id: str
    output: str | list[Any]
    id: str | None = None
    status: str | None = None


class ReasoningItem(_Strict):
    type: Literal["reasoning"]
    id: str | None = None
    summary: list[Any] = []
    content: list[Any] | None = None
    encrypted_content: str | None = None
    status: str | None = None


InputItem = Annotated[MessageItem | FunctionCallItem | FunctionCallOutputItem | ReasoningItem,
                      Field(discriminator="type")]


class TextFormat(BaseModel):
    """``{"type": "text"}``, ``{"type": "json_object"}`` or ``{"type": "json_schema", "name",
    "schema", "strict"}`` (checked in chat_plan.responses_text_format)."""

    model_config = ConfigDict(extra="allow")
    type: Literal["text", "json_schema", "json_object"]


class TextConfig(_Strict):
    format: TextFormat | None = None
    verbosity: str | None = None  # advisory


class Reasoning(_Strict):
    effort: Literal["none", "minimal", "low", "medium", "high"] | None = None
    summary: str | None = None  # advisory: reasoning is returned whole, not summarised
    generate_summary: str | None = None  # advisory (older name)


def _check_images(items: Any) -> None:
    """input_image parts, checked up front so the 400 names the part (a union's errors would
    name the wrong branch)."""
    for i, item in enumerate(items if isinstance(items, list) else ()):
        content = item.get("content") if isinstance(item, dict) else None
        for j, part in enumerate(content if isinstance(content, list) else ()):
            if not (isinstance(part, dict) and part.get("type") == "input_image"):
                continue
            where = f"input.{i}.content.{j}"
            if part.get("file_id") is not None:
                raise ValueError(f"{where}.file_id is not supported (mlxctl has no Files API): send image_url")
            if not isinstance(part.get("image_url"), str) or not part["image_url"]:
                raise ValueError(f"{where}: an input_image needs image_url (a URL or a data URL)")
            if item.get("role") != "user":
                raise ValueError(f"{where}: input_image parts are only allowed in user messages")


class ResponsesRequest(_Strict):
    model: str
    input: str | list[InputItem]
    instructions: str | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    previous_response_id: str | None = None
    store: bool = True
    stream: bool = False
    text: TextConfig | None = None
    truncation: Literal["disabled"] | None = None
    # advisory: no effect on the output
    metadata: dict[str, str] | None = None
    client_metadata: dict[str, Any] | None = None
    include: list[str] | None = None  # of NOTHING_TO_INCLUDE only
    user: str | None = None
    safety_identifier: str | None = None
    service_tier: str | None = None
    prompt_cache_key: str | None = None
    prompt_cache_retention: str | None = None
    stream_options: dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    max_tool_calls: int | None = None
    tools: list[Any] | None = None
    tool_choice: Any = None
    reasoning: Reasoning | None = None
    # refused when set
    top_logprobs: int | None = None
    background: bool | None = None
    conversation: Any = None
    prompt: Any = None

    @field_validator("input", mode="before")
    @classmethod
    def _known_items(cls, value: Any) -> Any:
        for item in value if isinstance(value, list) else ():
            if isinstance(item, dict) and "type" not in item:
                item["type"] = "message"  # an easy input message: role and content only
        _check_images(value)
        return _refuse_unknown_types(value, ("message", "function_call", "function_call_output", "reasoning"),
                                     "input items")

    @field_validator("include")
    @classmethod
    def _nothing_to_include(cls, value: list[str] | None) -> list[str] | None:
        for i, name in enumerate(value or ()):
            if name not in NOTHING_TO_INCLUDE:
                raise ValueError(f"include[{i}] {name!r} is not supported yet (mlxctl accepts only "
                                 f"{', '.join(NOTHING_TO_INCLUDE)}, data it never generates)")
        return value

    @field_validator("top_logprobs", "background", "conversation", "prompt")
    @classmethod
    def _unsupported(cls, value: Any, info) -> Any:
        return _refuse_when_set(value, f"{info.field_name} is")
