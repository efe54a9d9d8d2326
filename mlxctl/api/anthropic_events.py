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
    """Split pieces (reasoning, text, tool-call deltas) -> content-block events, opening and
    closing blocks as the kind of output changes: thinking, then text, then tool_use blocks.

    Blank text with no text block open (the newlines between ``</think>`` and a tool call) is held
    back: it opens a text block only when more text follows, or at the end when nothing was called,
    as the non-streamed message (``content_blocks``) has it."""

    def __init__(self) -> None:
        self.index = -1
        self.kind: str | None = None  # the open block: "thinking", "text" or "tool_use:<call index>"
        self.called = False
        self._blank = ""  # blank text held back

    def feed(self, split) -> list[dict]:
        out: list[dict] = []
        if split.reasoning:
            out += self._ensure("thinking", {"type": "thinking", "thinking": "", "signature": ""})
            out.append(thinking_delta(split.reasoning, self.index))
        if split.content:
            out += self._text(split.content)
        for delta in split.calls:
            kind = f"tool_use:{delta.index}"
            if delta.id is not None:
                from mlxctl.api.anthropic_translate import tool_use_id

                self.called = True
                out += self._ensure(kind, {"type": "tool_use", "id": tool_use_id(delta.id), "name": delta.name,
                                           "input": {}})
            if delta.arguments and self.kind == kind:
                out.append(input_json_delta(delta.arguments, self.index))
        return out

    def close(self) -> list[dict]:
        """Stop the open block (an empty text block when nothing was said at all)."""
        out = self._text("", final=True) if self._blank and not self.called else []
        if self.index < 0:
            out += self._ensure("text", {"type": "text", "text": ""})
        return out + self._stop()

    def _text(self, text: str, final: bool = False) -> list[dict]:
        text, self._blank = self._blank + text, ""
        if not final and self.kind != "text" and not text.strip():
            self._blank = text
            return []
        return self._ensure("text", {"type": "text", "text": ""}) + [text_delta(text, self.index)]

    def _ensure(self, kind: str, block: dict) -> list[dict]:
        if self.kind == kind:
            return []
        out = self._stop()
        self.index += 1
        self.kind = kind
        return out + [content_block_start(self.index, block)]

    def _stop(self) -> list[dict]:
        if self.kind is None:
            return []
        out = [signature_delta(self.index)] if self.kind == "thinking" else []
        self.kind = None
        return out + [content_block_stop(self.index)]


def message_delta(stop: tuple[str, str | None], usage) -> dict:
    """The final usage: message_start could not know how much of the prompt the cache served."""
    return {"type": "message_delta", "delta": {"stop_reason": stop[0], "stop_sequence": stop[1]},
            "usage": usage_body(usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens)}


def message_stop() -> dict:
    return {"type": "message_stop"}


def error(kind: str, message: str) -> dict:
    return {"type": "error", "error": {"type": kind, "message": message}}
