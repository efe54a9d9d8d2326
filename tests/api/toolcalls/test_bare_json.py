"""Hermes answers that are a bare JSON call (Qwen2.5-Coder's habit in auto mode): read as calls
only when the whole answer is calls of offered tools with valid arguments; streamed, an answer
that starts with ``{`` or ``[`` is held back until that is decided."""

from __future__ import annotations

import pytest

from mlxctl.api.toolcalls import get_parser

from .helpers import TOOLS, check_stream, normalized, splits, stream

CALL = '{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}'

# (answer, expected content, expected [(name, arguments)])
VECTORS = [
    (CALL, None, [("get_weather", {"city": "Paris", "days": 3})]),
    (f"\n  {CALL}\n", None, [("get_weather", {"city": "Paris", "days": 3})]),
    ('[{"name": "get_time", "arguments": {}}, ' + CALL + "]", None,
     [("get_time", {}), ("get_weather", {"city": "Paris", "days": 3})]),
    # JSON that is no call stays text
    ('{"city": "Paris", "days": 3}', '{"city": "Paris", "days": 3}', []),
    ('[1, 2, 3]', '[1, 2, 3]', []),
    ("[]", "[]", []),
    # a tool that was not offered, arguments off the schema, other members: text
    ('{"name": "get_wether", "arguments": {"city": "Paris"}}', '{"name": "get_wether", "arguments": {"city": "Paris"}}', []),
    ('{"name": "get_weather", "arguments": {"days": 3}}', '{"name": "get_weather", "arguments": {"days": 3}}', []),
    ('{"name": "get_weather", "arguments": "Paris"}', '{"name": "get_weather", "arguments": "Paris"}', []),
    ('{"name": "get_time", "arguments": {}, "id": 1}', '{"name": "get_time", "arguments": {}, "id": 1}', []),
    ('[' + CALL + ', {"name": "nope", "arguments": {}}]', '[' + CALL + ', {"name": "nope", "arguments": {}}]', []),
    # text around the JSON: text (and a tagged call after it is still a call)
    (CALL + " Done.", CALL + " Done.", []),
    ("Sure: " + CALL, "Sure: " + CALL, []),
    ('{"a": 1}\n<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>', '{"a": 1}\n', [("get_time", {})]),
    ('{"name": "get_weather", "arguments": {"city": "Par', '{"name": "get_weather", "arguments": {"city": "Par', []),
]


@pytest.mark.parametrize(("text", "content", "calls"), VECTORS)
def test_a_bare_answer_whole_and_at_every_split(text, content, calls):
    expected = (content, calls)
    assert normalized(get_parser("hermes").parse(text, TOOLS)) == expected
    for pieces in splits(text):
        result, deltas = stream(get_parser("hermes"), pieces, TOOLS)
        assert normalized(result) == expected, pieces
        check_stream(result, deltas)


def test_without_tools_json_is_text_at_once():
    parser = get_parser("hermes")(None)
    assert parser.feed(CALL).content == CALL
    assert parser.finish().content == "" and parser.result() == (CALL, [])


def test_an_answer_starting_with_json_is_held_until_it_is_decided():
    parser = get_parser("hermes")(TOOLS)
    assert parser.feed(" ").content == ""  # may still start with "{"
    assert parser.feed('{"name": "get_time", ').content == ""
    assert parser.feed('"arguments": {}}').content == ""  # complete, but the answer may go on
    delta = parser.finish()
    assert delta.content == "" and [c.name for c in delta.calls] == ["get_time"]


def test_json_followed_by_text_is_released_as_soon_as_the_text_comes():
    parser = get_parser("hermes")(TOOLS)
    assert parser.feed(CALL).content == ""
    assert parser.feed(" so").content == CALL + " so"
    assert parser.feed(" there").content == " there"


def test_prose_is_released_at_once():
    parser = get_parser("hermes")(TOOLS)
    assert parser.feed("It is {sunny}.").content == "It is {sunny}."


def test_a_strict_tools_bare_call_is_announced_whole():
    strict = [{**TOOLS[0], "function": {**TOOLS[0]["function"], "strict": True}}, TOOLS[1]]
    parser = get_parser("hermes")(strict)
    parser.whole_calls = True
    deltas = [parser.feed(c) for c in CALL] + [parser.finish()]
    calls = [c for d in deltas for c in d.calls]
    assert [(c.index, c.name, c.arguments) for c in calls] == [(0, "get_weather", '{"city": "Paris", "days": 3}')]
