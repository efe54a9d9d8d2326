"""A bare JSON call (Qwen2.5-Coder's ``{"name": ..., "arguments": ...}`` without ``<tool_call>``
tags, in auto mode) comes back as a tool call; other JSON stays the answer's text. The real
SmolLM2 is made to write exactly such an answer by a JSON schema ``response_format`` (allowed
beside ``tool_choice: auto``), through the official client, streamed and not."""

from __future__ import annotations

import json

import pytest

from tests.server.infra import openai_client, served

MODEL = "smollm2-135m"
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
MESSAGES = [{"role": "user", "content": "What is the weather in Paris?"}]


def _exactly(value: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": {"const": value}}}


@pytest.fixture(scope="module")
def oai(engine):
    with served(engine) as url:
        yield openai_client(url)


def _ask(oai, answer: dict, stream: bool = False):
    return oai.chat.completions.create(model=MODEL, messages=MESSAGES, tools=[WEATHER], tool_choice="auto",
                                       response_format=_exactly(answer), temperature=0, max_tokens=60, stream=stream)


def test_a_bare_json_call_is_a_tool_call(oai):
    r = _ask(oai, {"name": "get_weather", "arguments": {"city": "Paris"}})
    message = r.choices[0].message
    assert r.choices[0].finish_reason == "tool_calls" and message.content is None
    assert [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls] == [
        ("get_weather", {"city": "Paris"})]


def test_a_bare_json_call_streams_as_a_tool_call(oai):
    chunks = list(_ask(oai, {"name": "get_weather", "arguments": {"city": "Paris"}}, stream=True))
    deltas = [d for c in chunks if c.choices for d in (c.choices[0].delta.tool_calls or [])]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert deltas[0].function.name == "get_weather" and not text.strip()
    assert json.loads("".join(d.function.arguments or "" for d in deltas)) == {"city": "Paris"}
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["tool_calls"]


@pytest.mark.parametrize("answer", [
    {"city": "Paris", "forecast": "sunny"},  # JSON that is no call
    {"name": "get_forecast", "arguments": {"city": "Paris"}},  # a tool that was not offered
])
@pytest.mark.slow  # over 6 s: the slow step (keeps the default suite near 15 minutes)
def test_other_json_stays_text(oai, answer):
    r = _ask(oai, answer)
    assert r.choices[0].finish_reason == "stop" and not r.choices[0].message.tool_calls
    assert json.loads(r.choices[0].message.content) == answer
    streamed = "".join(c.choices[0].delta.content or "" for c in _ask(oai, answer, stream=True) if c.choices)
    assert json.loads(streamed) == answer
