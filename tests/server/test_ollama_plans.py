"""Tools, format and think on /api/chat and /api/generate, with the ollama client on SmolLM2.

SmolLM2's template renders no tools: the server describes them in a Hermes system prompt, and
``tool_choice`` (an mlxctl extension: Ollama has none) forces the call with a grammar. SmolLM2
does not think: the think test starts the server with ``--reasoning-parser think`` and ends a raw
prompt inside ``<think>``, so what the model writes is thinking.
"""

from __future__ import annotations

import json

import httpx
import jsonschema
import ollama
import pytest

from tests.server.infra import MODEL, served

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
FORCED = {"model": MODEL, "messages": ASK, "tools": [WEATHER], "tool_choice": "required",
          "options": {"temperature": 0, "num_predict": 40}}
CITY = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}}, "required": ["city"],
        "additionalProperties": False}


@pytest.fixture(scope="module")
def url(engine):
    with served(engine, reasoning_parser="think") as base:
        yield base


@pytest.fixture(scope="module")
def client(url) -> ollama.Client:
    return ollama.Client(host=url)


def test_forced_tool_call_comes_whole_with_object_arguments(url):
    """The client has no tool_choice argument: the body it would send, with tool_choice added."""
    r = httpx.post(f"{url}/api/chat", timeout=120, json={**FORCED, "stream": False})
    out = ollama.ChatResponse.model_validate(r.json())
    (call,) = out.message.tool_calls
    assert call.function.name == "get_weather" and isinstance(call.function.arguments["city"], str)
    assert out.done_reason == "stop"


def test_streamed_forced_call_is_one_whole_call(url):
    with httpx.stream("POST", f"{url}/api/chat", json=FORCED, timeout=120) as r:
        lines = [ollama.ChatResponse.model_validate_json(line) for line in r.iter_lines()]
    calls = [c for line in lines for c in line.message.tool_calls or ()]
    assert [c.function.name for c in calls] == ["get_weather"] and isinstance(calls[0].function.arguments, dict)
    assert lines[-1].done


def test_a_templated_call_and_its_result_continue_the_chat(client):
    history = [*ASK, {"role": "assistant", "content": "", "tool_calls": [
        {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "content": "sunny, 21 C", "tool_name": "get_weather"}]
    out = client.chat(model=MODEL, messages=history, tools=[WEATHER], options={"temperature": 0, "num_predict": 4})
    assert out.done and out.eval_count == 4


def test_format_schema_shapes_the_answer(client):
    out = client.chat(model=MODEL, messages=[{"role": "user", "content": "Name the capital of France as JSON."}],
                      format=CITY, options={"temperature": 0, "num_predict": 30})
    jsonschema.validate(json.loads(out.message.content), CITY)


def test_think_puts_the_thinking_apart(client):
    out = client.generate(model=MODEL, prompt="<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>",
                          raw=True, think=True, options={"temperature": 0, "num_predict": 4})
    assert out.thinking and out.response == "" and "<think>" not in out.thinking


def test_think_off_is_accepted(client):
    out = client.chat(model=MODEL, messages=ASK, think=False, options={"temperature": 0, "num_predict": 2})
    assert out.eval_count == 2 and not out.message.thinking
