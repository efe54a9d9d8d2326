"""A tool call cut off by max_tokens, as the SDKs read it: streamed equals non-streamed.

The call's arguments are not valid JSON, so it is never a tool call (no tool_calls delta, no
tool_use block, no function_call item): the output is its raw text, ending for length. Before,
the streams sent the call with partial arguments and then the same text again (Claude Code ran
the tool on the unparsable input). A real server over the golden transcripts' scripted engine
(tests/server/golden_scenarios.py, scenario ``tool_cut_off``), read with the openai and
anthropic SDKs' stream helpers.
"""

from __future__ import annotations

import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState

from tests.server.golden_scenarios import SCENARIOS, chat_request, messages_request, responses_request, scripts
from tests.server.infra import MODEL, anthropic_client, openai_client, served
from tests.server.scripted_engine import ScriptedEngine

CUT = "tool_cut_off"
RAW = '<tool_call>\n{"name": "get_weather", "arguments": {"ci'  # what the scripted model wrote


@pytest.fixture(scope="module")
def url():
    with served(ScriptedEngine(scripts()), tool_call_parser="hermes") as base:
        yield base


def _body(request, stream: bool) -> dict:
    body = request(CUT, SCENARIOS[CUT], stream)
    body.pop("stream")
    return body | {"model": MODEL}  # the name served() serves


def test_chat_stream_accumulates_to_the_whole_answer_without_a_call(url):
    client = openai_client(url)
    whole = client.chat.completions.create(**_body(chat_request, False)).choices[0]
    state = ChatCompletionStreamState()  # the stream helper's accumulator (its final parse refuses length)
    for chunk in client.chat.completions.create(**_body(chat_request, True), stream=True):
        state.handle_chunk(chunk)
    streamed = state.current_completion_snapshot.choices[0]
    assert whole.message.tool_calls is None and not streamed.message.tool_calls
    assert streamed.message.content == whole.message.content == RAW
    assert streamed.finish_reason == whole.finish_reason == "length"


def test_messages_stream_gives_one_text_block_like_the_whole_message(url):
    client = anthropic_client(url)
    whole = client.messages.create(**_body(messages_request, False))
    with client.messages.stream(**_body(messages_request, True)) as stream:
        streamed = stream.get_final_message()
    assert [b.type for b in streamed.content] == [b.type for b in whole.content] == ["text"]
    assert streamed.content[0].text == whole.content[0].text == RAW
    assert streamed.stop_reason == whole.stop_reason == "max_tokens"


def test_responses_stream_gives_no_function_call_item(url):
    client = openai_client(url)
    whole = client.responses.create(**_body(responses_request, False))
    events = list(client.responses.create(**_body(responses_request, True), stream=True))
    streamed = events[-1].response
    assert [i.type for i in streamed.output] == [i.type for i in whole.output] == ["message"]
    assert not any(e.type.startswith("response.function_call") for e in events)
    assert streamed.output_text == whole.output_text == RAW
    assert streamed.status == whole.status == "incomplete"
