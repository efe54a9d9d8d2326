"""Anthropic Messages API request bodies (POST /v1/messages, /v1/messages/count_tokens).

Unknown fields are rejected (``extra="forbid"``) so the client learns we ignored nothing. Advisory
fields (metadata, service_tier, cache_control, ``context_management`` edits that change nothing,
...) are accepted and have no effect. Tools,
tool_choice, extended thinking and ``output_config.format`` are honoured (checked further in
``chat_plan.py``); ``mcp_servers`` runs the MCP tool loop (server/mcp_views.py); fields we
cannot honour yet (containers) are declared only so that a request using them gets a 400 naming them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from mlxctl.api.anthropic_context import check_edits
from mlxctl.api.null_fields import NullMeansAbsent


class _Strict(NullMeansAbsent):  # null for an optional field: absent
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


class ToolUseBlock(_Strict):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]
    cache_control: dict[str, Any] | None = None


class ToolResultBlock(_Strict):
    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[TextBlock] | None = None
    is_error: bool | None = None
    cache_control: dict[str, Any] | None = None


class ThinkingBlock(_Strict):
    type: Literal["thinking"]
    thinking: str
    signature: str | None = None


class RedactedThinkingBlock(_Strict):
    type: Literal["redacted_thinking"]
    data: str


ContentBlock = Annotated[TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock | RedactedThinkingBlock,
                         Field(discriminator="type")]


_BLOCK_TYPES = ("text", "image", "tool_use", "tool_result", "thinking", "redacted_thinking")


class Message(_Strict):
    """A turn; a ``system`` one (Claude Code sends them mid-conversation) takes text only and is
    placed where it stands when the chat template renders it there (``system_messages.py``)."""

    role: Literal["user", "assistant", "system"]
    content: str | list[ContentBlock]

    @field_validator("content", mode="before")
    @classmethod
    def _known_block_types(cls, value: Any) -> Any:
        for block in value if isinstance(value, list) else ():
            kind = block.get("type") if isinstance(block, dict) else None
            if kind not in _BLOCK_TYPES:
                raise ValueError(f"content blocks of type {kind!r} are not supported (use {', '.join(_BLOCK_TYPES)})")
        return value

    @model_validator(mode="after")
    def _system_is_text(self) -> Message:
        if self.role == "system" and not isinstance(self.content, str) \
                and any(not isinstance(b, TextBlock) for b in self.content):
            raise ValueError("a system message takes text only (a string or text blocks)")
        return self


def _refuse_when_set(value: Any, what: str) -> Any:
    if value:
        raise ValueError(f"{what} are not supported yet")
    return value


class Thinking(_Strict):
    type: Literal["enabled", "disabled", "adaptive"]
    budget_tokens: int | None = Field(default=None, ge=0)
    display: str | None = None  # advisory


class OutputConfig(_Strict):
    effort: str | None = None  # passed to the chat template as reasoning_effort
    format: dict[str, Any] | None = None  # {"type": "json_schema", "schema": {...}}


class ContextManagement(_Strict):
    edits: list[dict[str, Any]] = []  # accepted only where they change nothing (anthropic_context.py)


class McpToolConfiguration(_Strict):
    enabled: bool | None = None
    allowed_tools: list[Annotated[str, Field(min_length=1)]] | None = None


class McpServer(_Strict):
    """An MCP connector entry; ``name`` picks a server of ``serve --mcp-config`` (``url`` and
    ``authorization_token`` are refused by the loop, naming the field)."""

    type: Literal["url"]
    name: str = Field(min_length=1)
    url: str | None = None
    authorization_token: str | None = None
    tool_configuration: McpToolConfiguration | None = None


class CountTokensRequest(_Strict):
    """The prompt part of a request: what /v1/messages/count_tokens accepts."""

    model: str
    messages: list[Message] = Field(min_length=1)
    system: str | list[TextBlock] | None = None
    thinking: Thinking | None = None
    tools: list[Any] | None = None
    tool_choice: dict[str, Any] | None = None
    mcp_servers: list[McpServer] | None = None  # servers of `serve --mcp-config`, by name (docs/mcp.md)
    output_config: OutputConfig | None = None
    output_format: dict[str, Any] | None = None  # the beta spelling of output_config.format
    cache_control: dict[str, Any] | None = None  # advisory
    context_management: ContextManagement | None = None  # advisory where its edits are no-ops

    @field_validator("context_management")
    @classmethod
    def _edits_change_nothing(cls, value: ContextManagement | None, info: ValidationInfo) -> ContextManagement | None:
        if value is not None and "messages" in info.data:
            check_edits(value.edits, info.data["messages"])
        return value


class MessagesRequest(CountTokensRequest):
    max_tokens: int = Field(ge=1)
    stream: bool = False
    temperature: float | None = Field(default=None, ge=0, le=1)
    top_p: float | None = Field(default=None, gt=0, le=1)
    top_k: int | None = Field(default=None, ge=0)
    stop_sequences: list[str] | None = None
    num_draft_tokens: int | None = Field(default=None, ge=0, le=64)  # serve --speculative: this request's drafts (0: none)
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
