"""Reading OpenAI-style server-sent events: output text, finish reason, usage, errors."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

DONE = "[DONE]"


@dataclass(frozen=True)
class Event:
    """What one ``data:`` line said."""

    text: str = ""
    has_output: bool = False  # content, reasoning or tool calls (an empty role chunk has none)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    error: str | None = None
    done: bool = False


def parse_line(line: str) -> Event | None:
    """The event on one SSE line, or None for comments, blanks and other fields."""
    if not line.startswith("data:"):
        return None
    payload = line[5:].strip()
    if payload == DONE:
        return Event(done=True)
    try:
        data = json.loads(payload)
    except json.JSONDecodeError:
        return Event(error=f"malformed event: {payload[:80]!r}")
    return _event(data) if isinstance(data, dict) else Event(error="event is not a JSON object")


def _event(data: dict[str, Any]) -> Event:
    if data.get("error"):
        return Event(error=_error_text(data["error"]))
    choice = (data.get("choices") or [{}])[0]
    text, has_output = _output(choice)
    return Event(text=text, has_output=has_output, finish_reason=choice.get("finish_reason"), usage=data.get("usage"))


def _output(choice: dict[str, Any]) -> tuple[str, bool]:
    if "text" in choice:  # completions
        return choice["text"] or "", bool(choice["text"])
    delta = choice.get("delta") or {}
    content = delta.get("content") or ""
    reasoning = delta.get("reasoning_content") or delta.get("reasoning") or ""
    return content, bool(content or reasoning or delta.get("tool_calls"))


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error)
