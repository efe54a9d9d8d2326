"""The MiniMax-M2, Seed-OSS and Nemotron formats through a real server and the official clients.

* Forced calls on real SmolLM2 (``--tool-call-parser`` set, as for a model of that family): the
  format's grammar makes the model write a call in it, and chat completions and Messages hand back
  that call, parsed and valid against the tool's schema.
* A scripted model writing each format as its models do, thinking first and every marker split
  across tokens: streamed and whole, chat completions give the same reasoning and the same call.
"""

from __future__ import annotations

import json

import jsonschema
import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState

from tests.server.infra import MODEL, anthropic_client, openai_client, served
from tests.server.scripted_engine import Script, ScriptedEngine

SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                           "days": {"type": "integer", "minimum": 1, "maximum": 7}},
          "required": ["city", "days"], "additionalProperties": False}
TOOL = {"type": "function",
        "function": {"name": "get_weather", "description": "Weather of a city", "parameters": SCHEMA}}
ASK = [{"role": "user", "content": "What is the weather in Paris for the next 3 days?"}]
FORMATS = ("minimax_m2", "seed_oss", "nemotron")
CALL_TOKENS = 64  # a call is ~30 tokens; the city is bounded and the grammar ends the generation


@pytest.fixture(scope="module", params=FORMATS)
def real(request, engine):
    with served(engine, tool_call_parser=request.param, reasoning_parser="none") as base:
        yield base


def test_chat_forced_call_is_written_in_the_format_and_parsed(real):
    r = openai_client(real).chat.completions.create(
        model=MODEL, messages=ASK, temperature=0, max_tokens=CALL_TOKENS, tools=[TOOL], tool_choice="required")
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls" and not choice.message.content
    [call] = choice.message.tool_calls
    assert call.function.name == "get_weather"
    jsonschema.validate(json.loads(call.function.arguments), SCHEMA)


def test_messages_named_tool_use_is_written_in_the_format_and_parsed(real):
    tool = {"name": "get_weather", "description": "Weather of a city", "input_schema": SCHEMA}
    r = anthropic_client(real).messages.create(
        model=MODEL, messages=ASK, max_tokens=CALL_TOKENS, extra_body={"temperature": 0}, tools=[tool],
        tool_choice={"type": "tool", "name": "get_weather"})
    assert r.stop_reason == "tool_use"
    [block] = [b for b in r.content if b.type == "tool_use"]
    assert block.name == "get_weather"
    jsonschema.validate(block.input, SCHEMA)


# what each family's model writes, one piece per token: markers split wherever a tokenizer may split them
WRITTEN = {
    "seed_oss": ("seed_oss", ("<seed:", "think>", "The user wants", " the weather.", "<seed:cot_budget_reflect>",
                              "I have 400 tokens left.", "</seed:cot_budget_reflect>", "</seed:think>",
                              "<seed:tool_call>\n<func", "tion=get_weather>\n<parameter=city>Par",
                              "is</parameter>\n<parameter=days>3</para", "meter>\n</function>\n</seed:tool_call>")),
    "minimax_m2": ("think", ("<think>", "The user wants", " the weather.", "</th", "ink>\n\n", "<minimax:tool_call>",
                             '\n<invoke name="get_', 'weather">\n<parameter name="city">Paris</parameter>\n',
                             '<parameter name="days">3</parameter>\n</inv', "oke>\n</minimax:tool_call>")),
    "nemotron": ("think", ("<think>", "The user wants", " the weather.", "</think>", "\n\n", "<TOOL", "CALL>[",
                           '{"name": "get_weather", "arguments": {"city": "Par', 'is", "days": 3}}]</TOOL',
                           "CALL>")),
}
REASONING = {"seed_oss": "The user wants the weather.<seed:cot_budget_reflect>I have 400 tokens left."
                         "</seed:cot_budget_reflect>"}


@pytest.fixture(scope="module", params=FORMATS)
def scripted(request):
    reasoning, pieces = WRITTEN[request.param]
    engine = ScriptedEngine({"call": Script(pieces)})
    with served(engine, tool_call_parser=request.param, reasoning_parser=reasoning) as base:
        yield request.param, base


def test_streamed_and_whole_chat_give_the_same_reasoning_and_call(scripted):
    fmt, url = scripted
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Please run script call now."}],
            "max_tokens": 64, "tools": [TOOL]}
    client = openai_client(url)
    whole = client.chat.completions.create(**body).choices[0]
    state = ChatCompletionStreamState()
    for chunk in client.chat.completions.create(**body, stream=True):
        state.handle_chunk(chunk)
    streamed = state.current_completion_snapshot.choices[0]
    for choice in (whole, streamed):
        assert choice.finish_reason == "tool_calls" and not choice.message.content
        reasoning = choice.message.model_extra["reasoning_content"].strip()
        assert reasoning == REASONING.get(fmt, "The user wants the weather.")
        [call] = choice.message.tool_calls
        assert call.function.name == "get_weather"
        assert json.loads(call.function.arguments) == {"city": "Paris", "days": 3}
