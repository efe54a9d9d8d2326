"""Shared tools, the streaming driver and the invariants every tool-call vector must keep."""

from __future__ import annotations

import json
import re

from mlxctl.api.toolcalls import ParseDelta, ToolParser

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather of a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": "integer"},
                    "metric": {"type": "boolean"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "opts": {"type": "object"},
                },
                "required": ["city"],
            },
        },
    },
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}},
]

ID = re.compile(r"call_[A-Za-z0-9]{24}")


def normalized(result):
    """(content, [(name, parsed arguments)]) of a parser result, for comparisons."""
    content, calls = result
    return content, [(c.name, json.loads(c.arguments)) for c in calls]


def stream(cls: type[ToolParser], pieces, tools=TOOLS):
    """Feed ``pieces`` then finish; return (result, deltas)."""
    parser = cls(tools)
    deltas: list[ParseDelta] = [parser.feed(piece) for piece in pieces]
    deltas.append(parser.finish())
    return parser.result(), deltas


def check_stream(result, deltas) -> None:
    """The deltas agree with the result: content, call headers and argument fragments."""
    content, calls = result
    streamed = "".join(d.content for d in deltas)
    if content is None:
        assert not streamed.strip()
    else:
        assert streamed == content
    headers: dict[int, tuple[str, str]] = {}
    fragments: dict[int, str] = {}
    for delta in deltas:
        for piece in delta.calls:
            if piece.index not in headers:
                assert piece.id is not None and piece.name is not None, piece
                headers[piece.index] = (piece.id, piece.name)
            else:
                assert piece.id is None and piece.name is None, piece
            fragments[piece.index] = fragments.get(piece.index, "") + piece.arguments
    by_id = {call_id: index for index, (call_id, _) in headers.items()}
    for call in calls:
        assert ID.fullmatch(call.id), call.id
        index = by_id[call.id]
        assert headers[index][1] == call.name
        assert fragments[index] == call.arguments
        assert isinstance(json.loads(call.arguments), dict)
    assert len({call.id for call in calls}) == len(calls)
    assert [by_id[c.id] for c in calls] == sorted(by_id[c.id] for c in calls)


def splits(text: str):
    """Every split of ``text`` into two pieces, and one character at a time."""
    for i in range(len(text) + 1):
        yield [text[:i], text[i:]]
    yield list(text)
