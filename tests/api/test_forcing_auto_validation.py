"""`tool_choice: auto` calls checked against their schema, end to end: the openai client against
a real server over the real SmolLM2.

A greedy small model cannot be relied on to write a call off its schema by itself, so the output
is steered with a regex (``structured_outputs``, which ``auto`` allows): the engine generates,
token by token under the constraint, a Hermes call whose ``days`` is a string where the schema
wants an integer. The server then parses it as any auto-mode output.
"""

from __future__ import annotations

import json

import pytest

from mlxctl.api.toolcalls import add_validation_listener
from tests.server.infra import openai_client, served

MODEL = "smollm2-135m"
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
          "required": ["city"]}
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": "soon"}}\n</tool_call>'
GOOD = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n</tool_call>'
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]


def literal(text: str) -> str:
    """A regex matching exactly ``text`` (hex escapes, valid in Rust's regex syntax)."""
    return "".join(c if c.isalnum() or c == " " else f"\\x{{{ord(c):X}}}" for c in text)


def weather(strict: bool | None) -> dict:
    fn = {"name": "get_weather", "parameters": SCHEMA}
    return {"type": "function", "function": fn if strict is None else {**fn, "strict": strict}}


@pytest.fixture(scope="module")
def url(smollm2_engine):
    with served(smollm2_engine) as base:
        yield base


@pytest.fixture(scope="module")
def oai(url):
    return openai_client(url)


@pytest.fixture
def heard():
    events = []
    remove = add_validation_listener(lambda *event: events.append(event))
    yield events
    remove()


def chat(oai, strict, text=CALL, **kw):
    return oai.chat.completions.create(model=MODEL, messages=MESSAGES, tools=[weather(strict)], temperature=0,
                                       max_tokens=60, extra_body={"structured_outputs": {"regex": literal(text)}}, **kw)


@pytest.mark.slow  # over 6 s: the slow step (keeps the default suite near 15 minutes)
@pytest.mark.parametrize("strict", [None, False])
def test_a_call_off_the_schema_of_a_lenient_tool_is_returned_and_reported(oai, heard, strict):
    choice = chat(oai, strict).choices[0]
    assert choice.finish_reason == "tool_calls"
    [call] = choice.message.tool_calls
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris", "days": "soon"}
    assert [(name, rejected) for name, _, rejected in heard] == [("get_weather", False)]
    assert "days" in heard[0][1]


def test_a_call_off_the_schema_of_a_strict_tool_is_its_text(oai, heard):
    choice = chat(oai, True).choices[0]
    assert choice.finish_reason == "stop"
    assert choice.message.tool_calls is None
    assert choice.message.content == CALL
    assert [(name, rejected) for name, _, rejected in heard] == [("get_weather", True)]


def test_streamed_the_strict_call_is_never_announced(oai):
    chunks = list(chat(oai, True, stream=True))
    assert not any(c.choices[0].delta.tool_calls for c in chunks if c.choices)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == CALL
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_a_valid_call_of_a_strict_tool_streams_as_one_call(oai, heard):
    chunks = list(chat(oai, True, text=GOOD, stream=True))
    deltas = [d for c in chunks if c.choices for d in c.choices[0].delta.tool_calls or ()]
    assert deltas[0].index == 0 and deltas[0].function.name == "get_weather"
    assert json.loads("".join(d.function.arguments or "" for d in deltas)) == {"city": "Paris", "days": 2}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert heard == []
