"""JSON null for an optional request field means the field is absent, on every endpoint, as the
hosted APIs read it; strict typing stays (a string is still not a number, a required field
still needs a value)."""

from __future__ import annotations

import httpx
import pytest

from tests.server.infra import anthropic_client, openai_client, served

MODEL = "smollm2-135m"
HI = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def url(engine):
    with served(engine) as base:
        yield base


def test_chat_nulls_are_defaults(url):
    r = openai_client(url).chat.completions.create(
        model=MODEL, messages=HI, max_completion_tokens=2, n=None, logprobs=None, store=None, temperature=None,
        stop=None, max_tokens=None, top_logprobs=None, seed=None, parallel_tool_calls=None, tools=None,
        extra_body={"stream": None, "ignore_eos": None, "skip_special_tokens": None})
    assert len(r.choices) == 1 and r.choices[0].logprobs is None and r.usage.completion_tokens <= 2


def test_chat_null_inside_stream_options(url):
    stream = openai_client(url).chat.completions.create(
        model=MODEL, messages=HI, max_tokens=2, stream=True, stream_options={"include_usage": None})
    chunks = list(stream)
    assert chunks and all(c.usage is None for c in chunks)  # include_usage absent: false


def test_completions_nulls_are_defaults(url):
    r = openai_client(url).completions.create(
        model=MODEL, prompt="Hi", max_tokens=2, n=None, echo=None, logprobs=None, stop=None, temperature=None,
        best_of=None, suffix=None)
    assert len(r.choices) == 1 and not r.choices[0].text.startswith("Hi")


def test_responses_nulls_are_defaults(url):
    client = openai_client(url)
    r = client.responses.create(model=MODEL, input="Hi", max_output_tokens=2, store=None, temperature=None,
                                top_p=None, instructions=None, parallel_tool_calls=None, truncation=None,
                                extra_body={"stream": None})
    assert r.status in ("completed", "incomplete")
    assert client.responses.retrieve(r.id).id == r.id  # store absent: stored, as by default


def test_messages_nulls_are_defaults(url):
    client = anthropic_client(url)
    nulls = {"stream": None, "temperature": None, "top_k": None, "stop_sequences": None, "thinking": None}
    msg = client.messages.create(model=MODEL, messages=HI, max_tokens=2, metadata=None, system=None,
                                 extra_body=nulls)  # this SDK release takes no sampling arguments
    assert msg.type == "message" and msg.usage.output_tokens <= 2
    assert client.messages.count_tokens(model=MODEL, messages=HI, system=None, tools=None).input_tokens > 0


def test_tokenize_null_is_the_default(url):
    r = httpx.post(f"{url}/tokenize", json={"prompt": "Hi", "add_special_tokens": None, "messages": None}, timeout=30)
    assert r.status_code == 200 and r.json()["count"] > 0, r.text


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/v1/chat/completions", {"model": MODEL, "messages": HI, "max_tokens": "3000"}, "max_tokens"),
    ("/v1/chat/completions", {"model": MODEL, "messages": HI, "n": "2"}, "n"),
    ("/v1/chat/completions", {"model": None, "messages": HI}, "model"),
    ("/v1/chat/completions", {"model": MODEL, "messages": HI, "frobnicate": None}, "frobnicate"),
    ("/v1/completions", {"model": MODEL, "prompt": None}, "prompt"),
    ("/v1/responses", {"model": MODEL, "input": "Hi", "store": "false"}, "store"),
    ("/v1/messages", {"model": MODEL, "messages": HI, "max_tokens": None}, "max_tokens"),
], ids=["string-for-int", "string-for-n", "required-null", "unknown-null", "required-prompt", "string-for-bool",
        "anthropic-required-null"])
def test_wrong_types_and_required_nulls_are_still_400s(url, path, body, field):
    r = httpx.post(url + path, json=body, timeout=30)
    assert r.status_code == 400 and field in r.text, r.text
