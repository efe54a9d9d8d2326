"""Forced tool calls over schemas with keywords llguidance does not implement (Claude Code's
``TaskCreate`` has ``propertyNames``), on chat completions, Responses and Messages, through the
official clients: a tool that is not strict is relaxed (the call is forced, shaped by the rest of
its schema); a strict one is a 400 naming the tool and the keyword. Auto mode never compiles the
schema, and takes them too."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest

from tests.server.infra import anthropic_client, openai_client, served

MODEL = "smollm2-135m"
ASK = [{"role": "user", "content": "Create a task to write the release notes."}]
CALL_TOKENS = 96  # strings are bounded and no other member is allowed: the grammar ends the call

_TEXT = {"type": "string", "maxLength": 24}
# the shape of Claude Code's TaskCreate, with the keywords llguidance refuses at several depths
TASK_CREATE = {
    "type": "object",
    "properties": {
        "subject": _TEXT,
        "activeForm": _TEXT,
        "metadata": {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"},
                     "additionalProperties": _TEXT, "maxProperties": 2},
        "tags": {"type": "array", "items": _TEXT, "maxItems": 2, "uniqueItems": True},
    },
    "required": ["subject"],
    "additionalProperties": False,
    "if": {"required": ["tags"]}, "then": {"required": ["activeForm"]},
    "dependentSchemas": {"metadata": {"required": ["tags"]}},
    "unevaluatedProperties": False,
    "$schema": "https://json-schema.org/draft/2020-12/schema",
}
# one keyword llguidance refuses each, on an optional parameter
KEYWORD_SCHEMAS = {
    "propertyNames": {"type": "object", "propertyNames": {"maxLength": 4}, "maxProperties": 1},
    "if/then/else": {"type": "string", "maxLength": 8, "if": {"minLength": 2}, "then": {"maxLength": 6},
                     "else": {"maxLength": 4}},
    "dependentSchemas": {"type": "object", "dependentSchemas": {"a": {"required": ["b"]}}, "maxProperties": 1},
    "dependentRequired": {"type": "object", "dependentRequired": {"a": ["b"]}, "maxProperties": 1},
    "unevaluatedProperties": {"type": "object", "properties": {"a": _TEXT}, "unevaluatedProperties": False},
    "contains/minContains": {"type": "array", "items": _TEXT, "maxItems": 2, "contains": {"minLength": 1},
                             "minContains": 1},
    "not": {"type": "string", "maxLength": 8, "not": {"const": "x"}},
    "uniqueItems": {"type": "array", "items": _TEXT, "maxItems": 2, "uniqueItems": True},
}


@pytest.fixture(scope="module")
def url(engine):
    with served(engine) as base:
        yield base


def _chat_tool(schema: dict, strict: bool = False) -> dict:
    return {"type": "function", "function": {"name": "TaskCreate", "description": "Create a task",
                                             "parameters": schema, "strict": strict}}


def _subject_of(arguments: dict, schema: dict = TASK_CREATE) -> str:
    assert isinstance(arguments, dict) and isinstance(arguments["subject"], str)
    assert set(arguments) <= set(schema["properties"])  # additionalProperties false is kept
    return arguments["subject"]


def _chat_call(url: str, tool: dict, choice) -> dict:
    r = openai_client(url).chat.completions.create(
        model=MODEL, messages=ASK, temperature=0, max_tokens=CALL_TOKENS, tools=[tool], tool_choice=choice)
    assert r.choices[0].finish_reason == "tool_calls"
    [call] = r.choices[0].message.tool_calls
    assert call.function.name == "TaskCreate"
    return json.loads(call.function.arguments)


# one case of each sweep in the default suite; the rest run in the slow step
SLOW = pytest.mark.slow


@pytest.mark.parametrize("choice", ["required",
                                    pytest.param({"type": "function", "function": {"name": "TaskCreate"}}, marks=SLOW)])
@pytest.mark.slow  # over 6 s: the slow step (keeps the default suite near 15 minutes)
def test_chat_forced_call_over_task_create_is_relaxed(url, choice):
    _subject_of(_chat_call(url, _chat_tool(TASK_CREATE), choice))


@pytest.mark.parametrize("keyword", [k if k == "propertyNames" else pytest.param(k, marks=SLOW)
                                     for k in sorted(KEYWORD_SCHEMAS)])
def test_chat_forced_call_relaxes_each_unimplemented_keyword(url, keyword):
    schema = {"type": "object", "properties": {"subject": _TEXT, "extra": KEYWORD_SCHEMAS[keyword]},
              "required": ["subject"], "additionalProperties": False}
    _subject_of(_chat_call(url, _chat_tool(schema), "required"), schema)


def test_chat_strict_tool_is_refused_naming_tool_and_keyword(url):
    schema = {"type": "object", "properties": {"metadata": TASK_CREATE["properties"]["metadata"]},
              "required": ["metadata"], "additionalProperties": False}
    with pytest.raises(openai.BadRequestError) as err:
        openai_client(url).chat.completions.create(
            model=MODEL, messages=ASK, max_tokens=CALL_TOKENS, tools=[_chat_tool(schema, strict=True)],
            tool_choice="required")
    message = err.value.body["message"]
    assert "'TaskCreate'" in message and "propertyNames" in message and "strict" in message


def test_chat_schema_refused_even_relaxed_names_the_tool(url):
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "(?<=a)b"}},
              "required": ["code"]}
    with pytest.raises(openai.BadRequestError) as err:
        openai_client(url).chat.completions.create(
            model=MODEL, messages=ASK, max_tokens=CALL_TOKENS, tools=[_chat_tool(schema)], tool_choice="required")
    assert "'TaskCreate'" in err.value.body["message"]


def test_chat_auto_mode_takes_the_schema(url):
    r = openai_client(url).chat.completions.create(
        model=MODEL, messages=ASK, temperature=0, max_tokens=8, tools=[_chat_tool(TASK_CREATE)])
    assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")


def _responses_tool(strict: bool = False) -> dict:
    return {"type": "function", "name": "TaskCreate", "description": "Create a task", "parameters": TASK_CREATE,
            "strict": strict}


def test_responses_forced_call_over_task_create_is_relaxed(url):
    r = openai_client(url).responses.create(
        model=MODEL, input=ASK, temperature=0, max_output_tokens=CALL_TOKENS, tools=[_responses_tool()],
        tool_choice={"type": "function", "name": "TaskCreate"})
    [item] = r.output
    assert item.type == "function_call" and item.name == "TaskCreate"
    _subject_of(json.loads(item.arguments))


def test_responses_strict_tool_is_refused_naming_tool_and_keyword(url):
    with pytest.raises(openai.BadRequestError) as err:
        openai_client(url).responses.create(
            model=MODEL, input=ASK, max_output_tokens=CALL_TOKENS, tools=[_responses_tool(strict=True)],
            tool_choice="required")
    assert "'TaskCreate'" in err.value.body["message"] and "unevaluatedProperties" in err.value.body["message"]


def test_responses_auto_mode_takes_the_schema(url):
    r = openai_client(url).responses.create(
        model=MODEL, input=ASK, temperature=0, max_output_tokens=8, tools=[_responses_tool()])
    assert r.status in ("completed", "incomplete")


def _claude_tool(strict: bool | None = None) -> dict:
    tool = {"name": "TaskCreate", "description": "Create a task", "input_schema": TASK_CREATE}
    return tool if strict is None else {**tool, "strict": strict}


@pytest.mark.parametrize("choice", [{"type": "any"}, pytest.param({"type": "tool", "name": "TaskCreate"}, marks=SLOW)])
def test_messages_forced_tool_use_over_task_create_is_relaxed(url, choice):
    msg = anthropic_client(url).messages.create(
        model=MODEL, messages=ASK, max_tokens=CALL_TOKENS, extra_body={"temperature": 0},
        tools=[_claude_tool()], tool_choice=choice)
    assert msg.stop_reason == "tool_use"
    [block] = [b for b in msg.content if b.type == "tool_use"]
    assert block.name == "TaskCreate"
    _subject_of(block.input)


def test_messages_strict_tool_is_refused_naming_tool_and_keyword(url):
    with pytest.raises(anthropic.BadRequestError) as err:
        anthropic_client(url).messages.create(
            model=MODEL, messages=ASK, max_tokens=CALL_TOKENS, tools=[_claude_tool(strict=True)],
            tool_choice={"type": "any"})
    message = err.value.body["error"]["message"]
    assert "'TaskCreate'" in message and "dependentSchemas" in message


def test_messages_auto_mode_takes_the_schema(url):
    msg = anthropic_client(url).messages.create(
        model=MODEL, messages=ASK, max_tokens=8, tools=[_claude_tool()])
    assert msg.stop_reason in ("end_turn", "max_tokens", "tool_use")
