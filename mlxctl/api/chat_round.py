"""One round of a chat's generation, whatever the protocol: what the model thought, said and called.

The MCP tool loop (api/tool_loop.py) reads rounds in this shape and each protocol builds its
answer from them (OpenAI choices, Anthropic content blocks, Responses output items). ``finish``
is the neutral vocabulary of how a round ended: "stop", "length" or "tool_calls" (a stop that
ended in calls).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mlxctl.api.chat_split import SplitResult, arguments_object
from mlxctl.api.openai_pieces import finish_reason
from mlxctl.engine.events import FinishReason, TokenLogprob, Usage
from mlxctl.api.toolcalls import ToolCall


@dataclass
class RoundResult:
    reasoning: str | None
    content: str | None
    calls: list[ToolCall]
    finish: str  # "stop", "length" or "tool_calls"
    stop_string: str | None = None
    usage: Usage | None = None
    logprobs: tuple[TokenLogprob, ...] | None = None
    ran: list[Any] = field(default_factory=list)  # the MCP calls of this round that ran (tool_loop.McpCall)

    @classmethod
    def of(cls, result: SplitResult, reason: FinishReason, stop_string: str | None = None,
           usage: Usage | None = None, logprobs: tuple[TokenLogprob, ...] | None = None) -> "RoundResult":
        finish = finish_reason(reason)
        if result.calls and finish == "stop":
            finish = "tool_calls"
        return cls(result.reasoning, result.content, list(result.calls), finish, stop_string, usage, logprobs)

    def split(self) -> SplitResult:
        """As the splitter's result, with the calls the client sees."""
        return SplitResult(self.reasoning, self.content, list(self.calls))

    @property
    def reason(self) -> FinishReason:
        return FinishReason.LENGTH if self.finish == "length" else FinishReason.STOP


def assistant_turn(result: RoundResult, calls: list[ToolCall]) -> dict[str, Any]:
    """The round as the chat-template assistant message that made ``calls``."""
    turn: dict[str, Any] = {
        "role": "assistant", "content": result.content or "",
        "tool_calls": [{"id": c.id, "type": "function",
                        "function": {"name": c.name, "arguments": arguments_object(c.arguments)}} for c in calls],
    }
    if result.reasoning:
        turn["reasoning_content"] = result.reasoning
    return turn
