"""Anthropic Messages API request bodies (POST /v1/messages, /v1/messages/count_tokens).

Unknown fields are rejected (``extra="forbid"``) so the client learns we ignored nothing. Advisory
fields (metadata, service_tier, cache_control, ...) are accepted and have no effect. Fields that
change what the model should do and that we cannot honour yet (tools, extended thinking, MCP
servers, containers) are declared only so that a request using them gets a 400 naming them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TextBlock(_Strict):
    type: Literal["text"]
    text: str
    cache_control: dict[str, Any] | None = None  # advisory: prompt caching hints
    citations: list[Any] | None = None


class ImageBlock(_Strict):
    type: Literal["image"]
    source: dict[str, Any]
    cache_control: dict[str, Any] | None = None


ContentBlock = Annotated[TextBlock | ImageBlock, Field(discriminator="type")]


_BLOCK_TYPES = ("text", "image")


class Message(_Strict):
    role: Literal["user", "assistant"]
    content: str | list[ContentBlock]

    @field_validator("content", mode="before")
    @classmethod
    def _known_block_types(cls, value: Any) -> Any:
        for block in value if isinstance(value, list) else ():
            kind = block.get("type") if isinstance(block, dict) else None
            if kind not in _BLOCK_TYPES:
                raise ValueError(f"content blocks of type {kind!r} are not supported yet (only 'text')")
        return value


def _refuse_when_set(value: Any, what: str) -> Any:
    if value:
        raise ValueError(f"{what} are not supported yet")
    return value


class Thinking(_Strict):
    type: Literal["enabled", "disabled", "adaptive"]
    budget_tokens: int | None = None

    @field_validator("type")
    @classmethod
    def _not_enabled(cls, value: str) -> str:
        if value == "enabled":
            raise ValueError("extended thinking is not supported yet; omit it or use 'disabled'")
        return value


class OutputConfig(_Strict):
    effort: str | None = None  # advisory: there is no thinking budget to scale
    format: dict[str, Any] | None = None

    @field_validator("format")
    @classmethod
    def _no_format(cls, value: Any) -> Any:
        return _refuse_when_set(value, "structured output formats")


class CountTokensRequest(_Strict):
    """The prompt part of a request: what /v1/messages/count_tokens accepts."""

    model: str
    messages: list[Message] = Field(min_length=1)
    system: str | list[TextBlock] | None = None
    thinking: Thinking | None = None
    tools: list[Any] | None = None
    tool_choice: dict[str, Any] | None = None
    mcp_servers: list[Any] | None = None
    output_config: OutputConfig | None = None
    cache_control: dict[str, Any] | None = None  # advisory

    @field_validator("tools", "tool_choice")
    @classmethod
    def _no_tools(cls, value: Any) -> Any:
        return _refuse_when_set(value, "tools and tool_choice")

    @field_validator("mcp_servers")
    @classmethod
    def _no_mcp(cls, value: Any) -> Any:
        return _refuse_when_set(value, "MCP servers")


class MessagesRequest(CountTokensRequest):
    max_tokens: int = Field(ge=1)
    stream: bool = False
    temperature: float | None = Field(default=None, ge=0, le=1)
    top_p: float | None = Field(default=None, gt=0, le=1)
    top_k: int | None = Field(default=None, ge=0)
    stop_sequences: list[str] | None = None
    metadata: dict[str, Any] | None = None  # advisory
    service_tier: str | None = None  # advisory
    speed: str | None = None  # advisory
    inference_geo: str | None = None  # advisory
    diagnostics: dict[str, Any] | None = None  # advisory: no prompt-cache diagnostics to give
    container: Any = None

    @field_validator("container")
    @classmethod
    def _no_container(cls, value: Any) -> Any:
        return _refuse_when_set(value, "containers")

    @field_validator("stop_sequences")
    @classmethod
    def _non_empty_stops(cls, value: list[str] | None) -> list[str] | None:
        if value and any(not s for s in value):
            raise ValueError("stop sequences must be non-empty strings")
        return value
