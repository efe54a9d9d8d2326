"""Reasoning end to end: the official openai and anthropic clients against a real server on SmolLM2.

SmolLM2 does not think, so the server is started with ``--reasoning-parser think`` and each request
gives a thinking budget: the grammar then makes the model open ``<think>``, think for at most N
tokens, close ``</think>`` and write the answer the request constrains (a regex, a JSON schema).
What the model thinks and says is its own (greedy); the tests check where each part lands.
"""

from __future__ import annotations

import json
import re

import anthropic
import openai
import pytest

from tests.server.infra import anthropic_client, openai_client, served

MODEL = "smollm2-135m"
BUDGET = 8  # thinking tokens
ANSWER = r"[A-Z][a-z]+(, [a-z]+)?[.!]"  # the regex the chat answer must match
WORD = {"type": "object", "properties": {"word": {"type": "string", "maxLength": 10}}, "required": ["word"],
        "additionalProperties": False}
ASK = [{"role": "user", "content": "Say hello to me."}]


@pytest.fixture(scope="module")
def url(engine):
    with served(engine, reasoning_parser="think") as base:
        yield base


@pytest.fixture(scope="module")
def oai(url) -> openai.OpenAI:
    return openai_client(url)


@pytest.fixture(scope="module")
def claude(url) -> anthropic.Anthropic:
    return anthropic_client(url)


CHAT = {"model": MODEL, "messages": ASK, "temperature": 0, "max_tokens": 40,
        "extra_body": {"thinking_budget": BUDGET, "structured_outputs": {"regex": ANSWER}}}


@pytest.fixture(scope="module")
def chat(oai):
    return oai.chat.completions.create(**CHAT)


def test_openai_message_splits_thinking_from_the_answer(chat):
    choice = chat.choices[0]
    extra = choice.message.model_extra
    assert extra["reasoning_content"] and extra["reasoning_content"] == extra["reasoning"]
    assert "<think>" not in extra["reasoning_content"] and "</think>" not in extra["reasoning_content"]
    assert re.fullmatch(ANSWER, choice.message.content.strip())
    assert choice.finish_reason == "stop"
    assert chat.usage.completion_tokens > BUDGET  # the thinking tokens count as completion tokens


def test_openai_stream_sends_reasoning_then_the_answer(oai, chat):
    chunks = list(oai.chat.completions.create(**CHAT, stream=True))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    reasoning = [(d.model_extra or {}).get("reasoning_content") or "" for d in deltas]
    assert all((d.model_extra or {}).get("reasoning") == ((d.model_extra or {}).get("reasoning_content"))
               for d in deltas)
    content = [d.content or "" for d in deltas]
    last_thought = max(i for i, r in enumerate(reasoning) if r)
    first_word = min(i for i, c in enumerate(content) if c.strip())
    assert last_thought <= first_word
    message = chat.choices[0].message
    assert "".join(reasoning) == message.model_extra["reasoning_content"]
    assert "".join(content) == message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"


MESSAGES = {"model": MODEL, "max_tokens": 40, "messages": ASK, "thinking": {"type": "enabled", "budget_tokens": BUDGET},
            # greedy (this SDK release takes no sampling arguments)
            "extra_body": {"temperature": 0, "output_config": {"format": {"type": "json_schema", "schema": WORD}}}}


@pytest.fixture(scope="module")
def message(claude):
    return claude.messages.create(**MESSAGES)


def test_anthropic_thinking_block_then_text_block(message):
    thinking, text = message.content
    assert thinking.type == "thinking" and thinking.thinking and thinking.signature == ""
    assert "</think>" not in thinking.thinking
    assert text.type == "text"
    assert set(json.loads(text.text)) == {"word"}
    assert message.stop_reason == "end_turn"


def test_anthropic_stream_events_in_order(claude, message):
    events = list(claude.messages.create(**MESSAGES, stream=True))
    steps: list[tuple] = []
    for event in events:
        if event.type == "content_block_start":
            step = ("start", event.index, event.content_block.type)
        elif event.type == "content_block_delta":
            step = ("delta", event.index, event.delta.type)
        elif event.type == "content_block_stop":
            step = ("stop", event.index)
        else:
            step = (event.type,)
        if not steps or steps[-1] != step:
            steps.append(step)
    # (the SDK drops the ping that follows the first content_block_start)
    assert steps == [("message_start",), ("start", 0, "thinking"), ("delta", 0, "thinking_delta"),
                     ("delta", 0, "signature_delta"), ("stop", 0), ("start", 1, "text"), ("delta", 1, "text_delta"),
                     ("stop", 1), ("message_delta",), ("message_stop",)]
    thinking = "".join(e.delta.thinking for e in events if e.type == "content_block_delta"
                       and e.delta.type == "thinking_delta")
    assert thinking == message.content[0].thinking


def test_anthropic_stream_final_message_equals_the_message(claude, message):
    with claude.messages.stream(**MESSAGES) as stream:
        final = stream.get_final_message()
    assert [b.model_dump() for b in final.content] == [b.model_dump() for b in message.content]
    assert final.stop_reason == message.stop_reason
