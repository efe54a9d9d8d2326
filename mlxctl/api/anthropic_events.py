"""The Anthropic Messages streaming events, in the order Anthropic sends them.

message_start -> content_block_start -> ping -> content_block_delta ... -> content_block_stop ->
message_delta -> message_stop. Each payload's ``type`` is also its SSE ``event:`` name.
"""

from __future__ import annotations

from mlxctl.api.anthropic_translate import usage_body


def message_start(message_id: str, model: str, input_tokens: int) -> dict:
    message = {
        "id": message_id, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": usage_body(input_tokens, 0),
    }
    return {"type": "message_start", "message": message}


def content_block_start() -> dict:
    return {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}


def ping() -> dict:
    return {"type": "ping"}


def text_delta(text: str) -> dict:
    return {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}


def content_block_stop() -> dict:
    return {"type": "content_block_stop", "index": 0}


def message_delta(stop: tuple[str, str | None], output_tokens: int) -> dict:
    return {"type": "message_delta", "delta": {"stop_reason": stop[0], "stop_sequence": stop[1]},
            "usage": {"output_tokens": output_tokens}}


def message_stop() -> dict:
    return {"type": "message_stop"}


def error(kind: str, message: str) -> dict:
    return {"type": "error", "error": {"type": kind, "message": message}}
