"""Tools, tool choice and structured output end to end: the official clients against the real model.

SmolLM2's chat template renders no tools, so the server describes them in a Hermes system prompt
and forces calls with a ``<tool_call>`` grammar; the model is greedy everywhere. Every request
here shares the same tool list (hence the same system prompt, which the prefix cache keeps), and
responses that several tests inspect are made once per module (fixtures), to keep the file short
on a CPU.
"""

from __future__ import annotations

import inspect
import json
import re

import anthropic
import jsonschema
import openai
import pytest

from tests.server.infra import anthropic_client, openai_client, served, without_keepalives

MODEL = "smollm2-135m"
# Small on purpose: the tools system prompt is then 149 tokens, which the prefix cache keeps for
# every later request (whole blocks and part of the next); prefill is the slow part on a CPU.
WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_SCHEMA}}
ASK = "What is the weather in Paris?"
MESSAGES = [{"role": "user", "content": ASK}]
CITY_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 12}},
    "required": ["city"],
    "additionalProperties": False,
}
# 67 prompt tokens: the structured-output requests below share its first (cached) 64-token block
CAPITAL = ('Reply with a JSON object whose only key is "city", holding the name of the capital of France, '
           "and write nothing else at all. What is the capital city of France?")
CALL_TOKENS = 40  # a forced call takes ~30 tokens; the grammar ends the generation when it closes


@pytest.fixture(scope="module")
def url(engine):
    with served(engine) as base:
        yield base


@pytest.fixture(scope="module")
def oai(url) -> openai.OpenAI:
    return openai_client(url)


@pytest.fixture(scope="module")
def claude(url) -> anthropic.Anthropic:
    return anthropic_client(url)


def chat(client, **kw):
    args = {"model": MODEL, "messages": MESSAGES, "temperature": 0, "max_tokens": CALL_TOKENS, **kw}
    return client.chat.completions.create(**args)


def ask(client, content: str, max_tokens: int = 20, **kw):
    return chat(client, messages=[{"role": "user", "content": content}], max_tokens=max_tokens, **kw)


def valid_arguments(arguments: str, schema: dict = WEATHER_SCHEMA) -> dict:
    value = json.loads(arguments)
    jsonschema.validate(value, schema)
    return value


def bad_request(call) -> str:
    with pytest.raises((openai.BadRequestError, anthropic.BadRequestError)) as info:
        call()
    assert info.value.status_code == 400
    body = info.value.body
    return (body.get("message") or body.get("error", {}).get("message", "")) if isinstance(body, dict) else str(body)


# -- OpenAI chat: tools ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def required_call(oai):
    return chat(oai, tools=[WEATHER], tool_choice="required")


def test_required_tool_choice_gives_a_valid_call(required_call):
    choice = required_call.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content in (None, "")
    [call] = choice.message.tool_calls
    assert call.type == "function" and call.function.name == "get_weather"
    assert re.fullmatch(r"call_[A-Za-z0-9]{24}", call.id)
    valid_arguments(call.function.arguments)


def test_named_tool_choice_streams_the_same_call(oai, required_call):
    chunks = list(chat(oai, tools=[WEATHER], stream=True,
                       tool_choice={"type": "function", "function": {"name": "get_weather"}}))
    deltas = [d for c in chunks if c.choices for d in c.choices[0].delta.tool_calls or ()]
    [first] = deltas  # a call is sent once complete: name and whole arguments in one delta
    assert first.index == 0 and first.type == "function" and first.function.name == "get_weather"
    assert re.fullmatch(r"call_[A-Za-z0-9]{24}", first.id)
    assert first.function.arguments == required_call.choices[0].message.tool_calls[0].function.arguments
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ""
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert all(c.choices[0].finish_reason is None for c in chunks[:-1])


def test_a_tool_result_round_trips_to_a_text_answer(oai, required_call):
    call = required_call.choices[0].message.tool_calls[0]
    history = [*MESSAGES,
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": call.id, "type": "function",
                    "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
               {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 22 C"}]
    choice = chat(oai, messages=history, tools=[WEATHER], max_tokens=4).choices[0]
    assert choice.message.tool_calls is None
    assert choice.message.content and choice.finish_reason in ("stop", "length")


def test_tool_choice_none_answers_with_text(oai):
    choice = ask(oai, CAPITAL, tools=[WEATHER], tool_choice="none", max_tokens=3).choices[0]
    assert choice.message.tool_calls is None
    assert choice.message.content and choice.finish_reason in ("stop", "length")


@pytest.mark.parametrize(("kw", "words"), [
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, ["'nope'", "get_weather"]),
    ({"tool_choice": "required"}, ["tool_choice", "no tools"]),
    ({"tools": [WEATHER, {"type": "function", "function": {
        "name": "bad", "parameters": {"type": "object", "properties": {"a": {"type": "nonsense"}}}}}]},
     ["tools[1].function.parameters", "not a valid JSON schema"]),
    ({"tools": [{"type": "retrieval"}]}, ["tools[0]", "function"]),
    ({"response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "object", "properties": {"a": {"type": "nonsense"}}}}}},
     ["JSON schema", "nonsense"]),
    ({"response_format": {"type": "json_object"}, "extra_body": {"structured_outputs": {"regex": "a"}}},
     ["response_format", "structured_outputs"]),
    ({"extra_body": {"structured_outputs": {"regex": "a", "choice": ["a"]}}}, ["exactly one"]),
    ({"extra_body": {"thinking_budget": 10}}, ["thinking budget", "reasoning format"]),
], ids=["unknown-tool", "required-without-tools", "bad-parameters", "not-a-function", "bad-response-schema",
        "two-formats", "two-structured-outputs", "budget-without-reasoning"])
def test_bad_tool_and_format_inputs_are_400s_naming_the_problem(oai, kw, words):
    message = bad_request(lambda: chat(oai, max_tokens=2, **kw))
    for word in words:
        assert word in message, message


# -- OpenAI chat: structured output -----------------------------------------------------------------


def test_json_object_output_parses(oai):
    choice = ask(oai, CAPITAL, response_format={"type": "json_object"}).choices[0]
    assert choice.finish_reason == "stop"
    assert isinstance(json.loads(choice.message.content), dict)


@pytest.fixture(scope="module")
def strict_json(oai):
    schema = {"type": "json_schema", "json_schema": {"name": "city", "schema": CITY_SCHEMA, "strict": True}}
    return ask(oai, CAPITAL, response_format=schema)


def test_json_schema_output_validates(strict_json):
    choice = strict_json.choices[0]
    assert choice.finish_reason == "stop" and choice.message.tool_calls is None
    valid_arguments(choice.message.content, CITY_SCHEMA)


def test_json_schema_not_strict_streamed_gives_the_same_json(oai, strict_json):
    schema = {"type": "json_schema", "json_schema": {"name": "city", "schema": CITY_SCHEMA, "strict": False}}
    chunks = list(ask(oai, CAPITAL, response_format=schema, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    valid_arguments(text, CITY_SCHEMA)
    assert text == strict_json.choices[0].message.content
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_structured_outputs_regex_matches_exactly(oai):
    pattern = r"\d{3}-\d{4}"
    choice = ask(oai, "Give me a phone number.", extra_body={"structured_outputs": {"regex": pattern}}).choices[0]
    assert re.fullmatch(pattern, choice.message.content) and choice.finish_reason == "stop"


def test_structured_outputs_choice_returns_one_choice(oai):
    choices = ["Paris", "London", "Zürich"]
    choice = ask(oai, CAPITAL, extra_body={"structured_outputs": {"choice": choices}}).choices[0]
    assert choice.message.content in choices and choice.finish_reason == "stop"


# -- Anthropic messages -------------------------------------------------------------------------------

CLAUDE_WEATHER = {"name": "get_weather", "input_schema": WEATHER_SCHEMA}  # the same system prompt as WEATHER
GREEDY = {"temperature": 0}  # this SDK release takes no sampling arguments


def message(client, **kw):
    args = {"model": MODEL, "messages": MESSAGES, "max_tokens": CALL_TOKENS, "extra_body": GREEDY, **kw}
    return client.messages.create(**args)


@pytest.fixture(scope="module")
def named_tool_use(claude):
    return message(claude, tools=[CLAUDE_WEATHER], tool_choice={"type": "tool", "name": "get_weather"})


def test_anthropic_named_tool_gives_tool_use(named_tool_use):
    [block] = named_tool_use.content
    assert block.type == "tool_use" and block.name == "get_weather" and block.id.startswith("toolu_")
    jsonschema.validate(block.input, WEATHER_SCHEMA)
    assert named_tool_use.stop_reason == "tool_use"


def test_anthropic_any_tool_streamed_ends_in_the_same_message(claude, named_tool_use):
    with claude.messages.stream(model=MODEL, messages=MESSAGES, max_tokens=CALL_TOKENS, extra_body=GREEDY,
                                tools=[CLAUDE_WEATHER], tool_choice={"type": "any"}) as stream:
        events = list(stream)
        final = stream.get_final_message()
    starts = [e.content_block for e in events if e.type == "content_block_start"]
    assert [(b.type, b.name, b.input) for b in starts] == [("tool_use", "get_weather", {})]
    partial = "".join(e.delta.partial_json for e in events
                      if e.type == "content_block_delta" and e.delta.type == "input_json_delta")
    assert json.loads(partial) == named_tool_use.content[0].input
    assert [b.model_dump(exclude={"id"}) for b in final.content] == \
        [b.model_dump(exclude={"id"}) for b in named_tool_use.content]
    assert final.stop_reason == named_tool_use.stop_reason == "tool_use"


def test_anthropic_tool_result_round_trips_to_text(claude, named_tool_use):
    use = named_tool_use.content[0]
    history = [*MESSAGES,
               {"role": "assistant", "content": [{"type": "tool_use", "id": use.id, "name": use.name,
                                                  "input": use.input}]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                             "content": "Sunny, 22 C"}]}]
    msg = message(claude, messages=history, tools=[CLAUDE_WEATHER], max_tokens=4)
    assert [b.type for b in msg.content] == ["text"] and msg.content[0].text
    assert msg.stop_reason in ("end_turn", "max_tokens")


def test_anthropic_output_config_json_schema(claude):
    config = {"format": {"type": "json_schema", "schema": CITY_SCHEMA}}
    if "output_config" in inspect.signature(claude.messages.create).parameters:
        kw = {"output_config": config}
    else:  # an older client
        kw = {"extra_body": {**GREEDY, "output_config": config}}
    msg = message(claude, messages=[{"role": "user", "content": CAPITAL}], max_tokens=20, **kw)
    assert msg.stop_reason == "end_turn"
    valid_arguments(msg.content[0].text, CITY_SCHEMA)


@pytest.mark.parametrize(("kw", "words"), [
    ({"tools": [CLAUDE_WEATHER], "tool_choice": {"type": "tool", "name": "nope"}}, ["'nope'", "get_weather"]),
    ({"tool_choice": {"type": "any"}}, ["no tools"]),
    ({"tools": [{"name": "get_weather"}]}, ["tools[0].input_schema"]),
    ({"tools": [{"type": "bash_20250124", "name": "bash"}]}, ["tools[0]", "bash_20250124"]),
    ({"extra_body": {**GREEDY, "thinking": {"type": "enabled", "budget_tokens": 1024}}}, ["thinking", "reasoning format"]),
], ids=["unknown-tool", "any-without-tools", "no-input-schema", "server-tool", "thinking-without-reasoning"])
def test_anthropic_bad_tool_inputs_are_400s(claude, kw, words):
    text = bad_request(lambda: message(claude, max_tokens=2, **kw))
    for word in words:
        assert word in text, text


# -- Responses ------------------------------------------------------------------------------------------

RESPONSES_WEATHER = {"type": "function", "name": "get_weather", "parameters": WEATHER_SCHEMA, "strict": True}


def respond(client, **kw):
    args = {"model": MODEL, "input": ASK, "max_output_tokens": CALL_TOKENS, "temperature": 0, **kw}
    return client.responses.create(**args)


@pytest.fixture(scope="module")
def function_call(oai):
    return respond(oai, tools=[RESPONSES_WEATHER], tool_choice="required")


@pytest.mark.slow  # a long end-to-end run: the slow step
def test_a_format_with_a_forced_call_answers_the_call(oai):
    """openai-agents' "tool, then answer in my type": the forced turn's output is the call."""
    fmt = {"type": "json_schema", "json_schema": {"name": "city", "schema": CITY_SCHEMA, "strict": True}}
    choice = chat(oai, tools=[WEATHER], tool_choice="required", response_format=fmt).choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls[0].function.name == "get_weather"
    text = {"format": {"type": "json_schema", "name": "city", "schema": CITY_SCHEMA, "strict": True}}
    out = respond(oai, tools=[RESPONSES_WEATHER], tool_choice="required", text=text)
    assert [item.type for item in out.output] == ["function_call"]


def test_responses_required_gives_a_function_call_item(function_call):
    assert function_call.status == "completed"
    [item] = function_call.output
    assert item.type == "function_call" and item.name == "get_weather" and item.status == "completed"
    assert item.call_id.startswith("call_") and item.id.startswith("fc_")
    valid_arguments(item.arguments)


def test_responses_streamed_call_has_argument_events(oai, function_call):
    with oai.responses.stream(model=MODEL, input=ASK, max_output_tokens=CALL_TOKENS, temperature=0,
                              tools=[RESPONSES_WEATHER], tool_choice={"type": "function", "name": "get_weather"}) as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = without_keepalives([e.type for e in events])
    assert kinds[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert kinds[-3:] == ["response.function_call_arguments.done", "response.output_item.done", "response.completed"]
    assert set(kinds[3:-3]) == {"response.function_call_arguments.delta"}
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    assert "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta") == done.arguments

    def shape(response):
        return [(i.type, i.name, i.arguments, i.status) for i in response.output]

    assert shape(final) == shape(function_call) and final.status == function_call.status
    assert done.arguments == function_call.output[0].arguments


def test_responses_function_call_output_round_trips(oai, function_call):
    call = function_call.output[0]
    items = [{"role": "user", "content": ASK},
             {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
             {"type": "function_call_output", "call_id": call.call_id, "output": "Sunny, 22 C"}]
    r = respond(oai, input=items, tools=[RESPONSES_WEATHER], max_output_tokens=4)
    assert [i.type for i in r.output] == ["message"] and r.output_text


def test_responses_text_format_json_schema(oai):
    fmt = {"type": "json_schema", "name": "city", "schema": CITY_SCHEMA, "strict": True}
    r = respond(oai, input=CAPITAL, text={"format": fmt}, max_output_tokens=20)
    assert r.status == "completed"
    valid_arguments(r.output_text, CITY_SCHEMA)


def test_responses_bad_tools_are_400s(oai):
    text = bad_request(lambda: respond(oai, tools=[{"type": "frobnicate"}], max_output_tokens=2))
    assert "tools[0]" in text and "frobnicate" in text
    text = bad_request(lambda: respond(oai, tools=[RESPONSES_WEATHER], max_output_tokens=2,
                                       tool_choice={"type": "function", "name": "nope"}))
    assert "'nope'" in text


# -- a reasoning format on a model that does not think ----------------------------------------------------


def test_required_call_is_enforced_when_the_model_skips_thinking(serve):
    client = openai.OpenAI(base_url=serve(reasoning_parser="think") + "/v1", api_key="x", max_retries=0)
    choice = chat(client, tools=[WEATHER], tool_choice="required", max_tokens=8).choices[0]
    text = choice.message.content or ""  # a call cut short by max_tokens is released as content
    assert text.startswith("<tool_call>"), f"the forcing grammar was not applied: {text!r}"
