"""Hermes-format answers that are a bare JSON call, without ``<tool_call>`` tags.

Qwen2.5 (Coder above all) often answers a request with tools in ``auto`` mode with just
``{"name": "get_weather", "arguments": {"city": "Paris"}}``. vLLM, llama.cpp and Ollama read that
as a call for these models, and so does mlxctl, narrowly: the whole answer (whitespace around it
aside) must be one JSON object, or a JSON list of them, each with exactly the members ``name``
and ``arguments``, the name one of the request's tools and the arguments an object valid for its
schema. Anything else (other JSON, a tool that was not offered, arguments off the schema, text
around the JSON) stays text, as written.

While an answer that starts with ``{`` or ``[`` streams, it is held back until it is decided:
to its end, unless a complete JSON value is followed by more text first, or it grows past
:data:`MAX_HELD` characters.
"""

from __future__ import annotations

import json
from typing import Any

MAX_HELD = 65536  # a longer answer is no call: release it as text
OPENERS = ("{", "[")


def bare_calls(text: str, tools: list[dict]) -> list[tuple[str, dict]] | None:
    """The calls a whole answer is, as (name, arguments); None when it is not exactly bare calls."""
    from mlxctl.api.toolcalls.base import ToolCall
    from mlxctl.api.toolcalls.registry import validate_arguments

    try:
        value = json.loads(text)
    except ValueError:
        return None
    objects = value if isinstance(value, list) else [value]
    if not objects or not all(_call_shaped(o) for o in objects):
        return None
    for o in objects:
        if validate_arguments(ToolCall(o["name"], json.dumps(o["arguments"], ensure_ascii=False), ""), tools):
            return None
    return [(o["name"], o["arguments"]) for o in objects]


def _call_shaped(value: Any) -> bool:
    return (isinstance(value, dict) and set(value) == {"name", "arguments"} and isinstance(value["name"], str)
            and isinstance(value["arguments"], dict))


class HeldAnswer:
    """An answer held back while it may still be bare calls: :meth:`add` each new piece."""

    def __init__(self) -> None:
        self.text = ""
        self._complete = False  # a whole JSON value has been read (only whitespace after it, so far)

    def add(self, piece: str) -> bool:
        """Take the next piece; True once the answer is decided to be text before its end: a
        complete JSON value with more than whitespace after it, or too long to be held."""
        self.text += piece
        if len(self.text) > MAX_HELD:
            return True
        if self._complete:
            return bool(piece.strip())
        if not any(c in piece for c in "}]"):
            return False  # no value can have been completed by this piece
        stripped = self.text.lstrip()
        try:
            _, end = json.JSONDecoder().raw_decode(stripped)
        except ValueError:
            return False
        self._complete = True
        return bool(stripped[end:].strip())
