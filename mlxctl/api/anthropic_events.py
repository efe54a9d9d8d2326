"""The Anthropic Messages streaming events, in the order Anthropic sends them.

message_start -> content_block_start -> ping -> content_block_delta ... -> content_block_stop ->
message_delta -> message_stop. Each payload's ``type`` is also its SSE ``event:`` name.
"""

from __future__ import annotations

import json

from mlxctl.api.anthropic_translate import tool_use_id, usage_body
from mlxctl.api.output_stream import CALL, REASONING, TEXT, Delta, Open, Segment


def message_start(message_id: str, model: str, input_tokens: int, cached_tokens: int = 0) -> dict:
    """``input_tokens``: the whole prompt, of which ``cached_tokens`` the prefix cache served."""
    message = {
        "id": message_id, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": usage_body(input_tokens, 0, cached_tokens),
    }
    return {"type": "message_start", "message": message}


def content_block_start(index: int = 0, block: dict | None = None) -> dict:
    return {"type": "content_block_start", "index": index, "content_block": block or {"type": "text", "text": ""}}


def ping() -> dict:
    return {"type": "ping"}


def text_delta(text: str, index: int = 0) -> dict:
    return {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}}


def thinking_delta(thinking: str, index: int) -> dict:
    return {"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": thinking}}


def signature_delta(index: int) -> dict:
    """Our thinking is not signed; clients that echo thinking blocks back get an empty one."""
    return {"type": "content_block_delta", "index": index, "delta": {"type": "signature_delta", "signature": ""}}


def input_json_delta(partial: str, index: int) -> dict:
    return {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": partial}}


def content_block_stop(index: int = 0) -> dict:
    return {"type": "content_block_stop", "index": index}


class BlockStream:
    """Output segments (api/output_stream.py) -> content-block events: thinking, text and
    tool_use blocks, numbered as they open; the first block's start is followed by a ``ping``,
    as Anthropic sends it."""

    def __init__(self) -> None:
        self.index = -1
        self.pinged = False

    def events(self, segments: list[Segment]) -> list[dict]:
        return [event for segment in segments for event in self._event(segment)]

    def whole(self, block: dict) -> list[dict]:
        """A block complete when it starts (an MCP call that ran, its result): start, a tool use's
        input as one input_json_delta, stop."""
        if block["type"] != "mcp_tool_use":
            return self._start(block) + [content_block_stop(self.index)]
        return (self._start({**block, "input": {}}) + [input_json_delta(json.dumps(block["input"]), self.index)]
                + [content_block_stop(self.index)])

    def _start(self, block: dict) -> list[dict]:
        self.index += 1
        out = [content_block_start(self.index, block)]
        if not self.pinged:
            self.pinged = True
            out.append(ping())
        return out

    def _event(self, segment: Segment) -> list[dict]:
        if isinstance(segment, Open):
            return self._start(_block(segment))
        if isinstance(segment, Delta):
            return [_DELTAS[segment.part](segment.text, self.index)]
        return ([signature_delta(self.index)] if segment.part == REASONING else []) + [content_block_stop(self.index)]


_DELTAS = {REASONING: thinking_delta, TEXT: text_delta, CALL: input_json_delta}


def _block(part: Open) -> dict:
    if part.part == REASONING:
        return {"type": "thinking", "thinking": "", "signature": ""}
    if part.part == TEXT:
        return {"type": "text", "text": ""}
    return {"type": "tool_use", "id": tool_use_id(part.call_id), "name": part.name, "input": {}}


def message_delta(stop: tuple[str, str | None], usage) -> dict:
    """The final usage: message_start could not know how much of the prompt the cache served."""
    return {"type": "message_delta", "delta": {"stop_reason": stop[0], "stop_sequence": stop[1]},
            "usage": usage_body(usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens)}


def message_stop() -> dict:
    return {"type": "message_stop"}


def error(kind: str, message: str) -> dict:
    return {"type": "error", "error": {"type": kind, "message": message}}
