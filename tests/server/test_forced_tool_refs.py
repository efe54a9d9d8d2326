"""Forced tool calls whose parameters use ``$defs``/``$ref`` (a pydantic model with a nested model
and an Enum), on chat completions, Responses and Messages, through the official clients: the
refs resolve (no 400 "Pointer '/$defs/...' does not exist") and the call comes back parsed and
valid against the tool's schema."""

from __future__ import annotations

import enum
import json

import jsonschema
import openai
import pydantic
import pytest

from tests.server.infra import anthropic_client, openai_client, served

MODEL = "smollm2-135m"
ASK = [{"role": "user", "content": "What is the weather forecast for Paris, France?"}]
CALL_TOKENS = 96  # the call is ~45 tokens; strings are bounded, the grammar ends the generation


class Unit(str, enum.Enum):
    celsius = "celsius"
    fahrenheit = "fahrenheit"


class Place(pydantic.BaseModel):
    city: str = pydantic.Field(max_length=16)
    country: str = pydantic.Field(max_length=16)


class Forecast(pydantic.BaseModel):
    place: Place
    unit: Unit
    days: int = pydantic.Field(ge=1, le=7)


OPENAI_TOOL = openai.pydantic_function_tool(Forecast, name="get_forecast")  # strict, with $defs
SCHEMA = OPENAI_TOOL["function"]["parameters"]
CLAUDE_SCHEMA = Forecast.model_json_schema()


@pytest.fixture(scope="module")
def url(engine):
    with served(engine) as base:
        yield base


def valid(arguments: dict, schema: dict) -> Forecast:
    jsonschema.validate(arguments, schema)
    return Forecast.model_validate(arguments)


def test_the_schemas_refer_to_definitions():
    assert {"Place", "Unit"} <= set(SCHEMA["$defs"]) and "$ref" in json.dumps(SCHEMA["properties"])


@pytest.mark.slow  # over 6 s: the slow step (keeps the default suite near 15 minutes)
def test_chat_required_call_over_refs_is_valid(url):
    r = openai_client(url).chat.completions.create(
        model=MODEL, messages=ASK, temperature=0, max_tokens=CALL_TOKENS, tools=[OPENAI_TOOL], tool_choice="required")
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    [call] = choice.message.tool_calls
    assert call.function.name == "get_forecast"
    valid(json.loads(call.function.arguments), SCHEMA)


@pytest.mark.slow  # over 6 s: the slow step (keeps the default suite near 15 minutes)
def test_responses_named_call_over_refs_is_valid(url):
    tool = {"type": "function", "name": "get_forecast", "parameters": SCHEMA, "strict": True}
    r = openai_client(url).responses.create(
        model=MODEL, input=ASK, temperature=0, max_output_tokens=CALL_TOKENS, tools=[tool],
        tool_choice={"type": "function", "name": "get_forecast"})
    assert r.status == "completed"
    [item] = r.output
    assert item.type == "function_call" and item.name == "get_forecast"
    valid(json.loads(item.arguments), SCHEMA)


@pytest.mark.slow  # over 6 s: the slow step (keeps the default suite near 15 minutes)
def test_messages_forced_tool_use_over_refs_is_valid(url):
    msg = anthropic_client(url).messages.create(
        model=MODEL, messages=ASK, max_tokens=CALL_TOKENS, extra_body={"temperature": 0},
        tools=[{"name": "get_forecast", "input_schema": CLAUDE_SCHEMA}],
        tool_choice={"type": "tool", "name": "get_forecast"})
    assert msg.stop_reason == "tool_use"
    [block] = msg.content
    assert block.type == "tool_use" and block.name == "get_forecast"
    valid(block.input, CLAUDE_SCHEMA)
