"""JSON nested too deep: a 400 that says so on every endpoint that reads JSON, never a 500."""

from __future__ import annotations

import httpx
import pytest

from mlxctl.api.json_depth import MAX_JSON_DEPTH, nested_deeper_than
from tests.server.infra import MODEL, chat_body

JSON_ENDPOINTS = ["/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/messages/count_tokens",
                  "/v1/responses", "/tokenize", "/detokenize", "/v1/embeddings", "/v1/rerank", "/v1/audio/speech"]
DEEP_ARRAY = "[" * 10_000 + "]" * 10_000
DEEP_OBJECT = '{"a":' * 10_000 + "1" + "}" * 10_000
JUST_PAST_THE_LIMIT = '{"model": "x", "messages": ' + "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH + "}"


def assert_too_deep(r: httpx.Response) -> None:
    assert r.status_code == 400, r.text
    message = r.json()["error"]["message"]
    assert "JSON nested too deep" in message and str(MAX_JSON_DEPTH) in message


@pytest.mark.parametrize("path", JSON_ENDPOINTS)
@pytest.mark.parametrize("body", [DEEP_ARRAY, DEEP_OBJECT, JUST_PAST_THE_LIMIT], ids=["array", "object", "limit+1"])
def test_a_body_nested_too_deep_is_a_400(base_url, path, body):
    r = httpx.post(f"{base_url}{path}", content=body, headers={"Content-Type": "application/json"}, timeout=60)
    assert_too_deep(r)


def test_the_anthropic_400_has_its_shape(base_url):
    r = httpx.post(f"{base_url}/v1/messages", content=DEEP_ARRAY, timeout=60)
    assert r.json()["type"] == "error" and r.json()["error"]["type"] == "invalid_request_error"


def test_chat_tool_call_arguments_nested_too_deep_are_a_400(base_url):
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": DEEP_ARRAY}}
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    assert_too_deep(httpx.post(f"{base_url}/v1/chat/completions", json=chat_body(messages=messages), timeout=60))


def test_responses_function_call_arguments_nested_too_deep_are_a_400(base_url):
    items = [{"type": "message", "role": "user", "content": "hi"},
             {"type": "function_call", "call_id": "c1", "name": "f", "arguments": DEEP_ARRAY},
             {"type": "function_call_output", "call_id": "c1", "output": "ok"}]
    body = {"model": MODEL, "input": items, "max_output_tokens": 16}
    assert_too_deep(httpx.post(f"{base_url}/v1/responses", json=body, timeout=60))


def nested_schema(levels: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    return schema


@pytest.mark.slow  # over 6 s: the slow step (keeps the default suite near 15 minutes)
def test_a_deep_tool_schema_within_the_limit_is_served(base_url):
    """The deepest tool parameter schema the limit lets through (60 nested objects) is a
    working request: the cap is no obstacle to real schemas."""
    def body(levels: int) -> dict:
        tool = {"type": "function", "function": {"name": "f", "parameters": nested_schema(levels)}}
        return chat_body(max_tokens=2, tools=[tool], tool_choice="required")

    levels = next(n for n in range(1, MAX_JSON_DEPTH) if nested_deeper_than(body(n + 1), MAX_JSON_DEPTH))
    assert levels >= 60
    r = httpx.post(f"{base_url}/v1/chat/completions", json=body(levels), timeout=300)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(("value", "depth"), [(1, 0), ("[", 0), ({}, 1), ([], 1), ({"a": [1, {"b": {}}]}, 4),
                                              ([[], [[[]]]], 4)])
def test_nested_deeper_than_counts_levels_of_arrays_and_objects(value, depth):
    assert not nested_deeper_than(value, depth)
    assert depth == 0 or nested_deeper_than(value, depth - 1)
