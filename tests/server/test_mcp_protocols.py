"""The MCP tool loop on /v1/messages and /v1/responses, and streamed on all three endpoints,
with the official SDKs over the real SmolLM2 and the calc test server (stdio).

SmolLM2 does not call tools on its own: the first round's call is forced with tool_choice (or
the exact output with a regex); the rounds after it answer freely."""

from __future__ import annotations

import json

import anthropic
import httpx
import openai
import pytest

from tests.mcp.helpers import calc_stdio
from tests.server.infra import MODEL
from tests.server.test_mcp_loop import _regex_literal, no_hub_call_returned

pytest.importorskip("mcp")

QUESTION = [{"role": "user", "content": "What is 2 + 3? Use the calculator."}]
REMEMBER = {"name": "remember", "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}},
                                                 "required": ["n"], "additionalProperties": False}}
CALC = [{"type": "mcp", "server_label": "calc", "require_approval": "never"}]


@pytest.fixture
def url(serve, tmp_path):
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"calc": calc_stdio(allow=["add", "boom"])}}))
    base = serve(mcp_config=str(config))
    # the engine is the session's: without its earlier prefixes each test's greedy rounds are the
    # ones it gives alone (a forced call over an unbounded integer once ran past max_output_tokens
    # after the whole suite had filled the cache)
    httpx.delete(f"{base}/v1/cache").raise_for_status()
    return base


def claude(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key="x", max_retries=0, timeout=300)


def oai(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=300)


def _ran_add(use, result) -> None:
    assert use.type == "mcp_tool_use" and use.name == "add" and use.server_name == "calc", use
    assert result.type == "mcp_tool_result" and result.tool_use_id == use.id and result.is_error is False
    assert result.content[0].text == str(use.input["a"] + use.input["b"])


# ---- /v1/messages -----------------------------------------------------------------------------


def _messages_ask(**extra) -> dict:
    return dict(model=MODEL, max_tokens=160, messages=QUESTION, mcp_servers=[{"type": "url", "name": "calc"}],
                tool_choice={"type": "tool", "name": "calc__add"}, betas=["mcp-client-2025-04-04"], **extra)


@pytest.mark.slow  # a long end-to-end run: the slow step
def test_messages_runs_the_call_and_shows_it_as_mcp_blocks(url):
    msg = claude(url).beta.messages.create(**_messages_ask())
    kinds = [b.type for b in msg.content]
    assert kinds[:2] == ["mcp_tool_use", "mcp_tool_result"], kinds
    _ran_add(msg.content[0], msg.content[1])
    no_hub_call_returned([b.name for b in msg.content if b.type == "tool_use"], msg.stop_reason,
                         ("end_turn", "max_tokens"), "tool_use")
    assert msg.model_extra["mcp_calls"][0]["name"] == "calc__add" and msg.model_extra["mcp_rounds"] >= 2


@pytest.mark.slow  # over 6 s: the slow step (keeps the default suite near 15 minutes)
def test_messages_streamed(url):
    with claude(url).beta.messages.stream(**_messages_ask()) as stream:
        events = [event.type for event in stream]
        msg = stream.get_final_message()
    assert [b.type for b in msg.content][:2] == ["mcp_tool_use", "mcp_tool_result"]
    _ran_add(msg.content[0], msg.content[1])
    assert events[0] == "message_start" and events[-1] == "message_stop"
    no_hub_call_returned([b.name for b in msg.content if b.type == "tool_use"], msg.stop_reason,
                         ("end_turn", "max_tokens"), "tool_use")


def test_messages_client_tool_comes_back_as_tool_use(url):
    msg = claude(url).messages.create(model=MODEL, max_tokens=120, tools=[REMEMBER],
                                      messages=[{"role": "user", "content": "Remember the number 7."}],
                                      tool_choice={"type": "tool", "name": "remember"}, extra_body={"mcp": True})
    assert msg.stop_reason == "tool_use" and [b.type for b in msg.content][-1] == "tool_use"
    assert msg.content[-1].name == "remember" and msg.model_extra["mcp_calls"] == []


@pytest.mark.parametrize(("server", "param"), [
    ({"type": "url", "name": "calc", "url": "https://example.com/mcp"}, "mcp_servers.0.url"),
    ({"type": "url", "name": "nope"}, "mcp_servers.0.name"),
])
def test_messages_bad_mcp_servers(url, server, param):
    r = httpx.post(f"{url}/v1/messages", timeout=60, json={"model": MODEL, "max_tokens": 8, "messages": QUESTION,
                                                         "mcp_servers": [server]})
    assert r.status_code == 400, r.text
    assert r.json()["type"] == "error" and param in r.json()["error"]["message"]


# ---- /v1/responses ----------------------------------------------------------------------------


def _responses_ask(**extra) -> dict:
    return dict(model=MODEL, input=QUESTION[0]["content"], max_output_tokens=160, tools=CALC,
                tool_choice={"type": "function", "name": "calc__add"}, **extra)


def _mcp_call(output, status: str) -> None:
    (listed,) = [item for item in output if item.type == "mcp_list_tools"]
    assert listed.server_label == "calc" and {t.name for t in listed.tools} == {"add", "boom"}
    call = next(item for item in output if item.type == "mcp_call")
    args = json.loads(call.arguments)
    assert call.server_label == "calc" and call.name == "add" and call.status == "completed"
    assert call.output == str(args["a"] + args["b"]) and call.error is None
    no_hub_call_returned([item.name for item in output if item.type == "function_call"], status,
                         ("completed", "incomplete"), "completed")


@pytest.mark.slow  # a long end-to-end run: the slow step
def test_responses_runs_the_call_as_an_mcp_call_item(url):
    resp = oai(url).responses.create(**_responses_ask())
    _mcp_call(resp.output, resp.status)
    assert resp.model_extra["mcp_rounds"] >= 2


@pytest.mark.slow  # over 6 s: the slow step (keeps the default suite near 15 minutes)
def test_responses_streamed(url):
    # create(stream=True), not stream(): the SDK's get_final_response() wants response.completed,
    # and the free last round may reach max_output_tokens (response.incomplete) on some BLAS
    events = list(oai(url).responses.create(stream=True, **_responses_ask()))
    kinds = [event.type for event in events]
    assert "response.mcp_call.completed" in kinds and "response.mcp_list_tools.completed" in kinds
    assert kinds[-1] in ("response.completed", "response.incomplete")
    _mcp_call(events[-1].response.output, events[-1].response.status)
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_responses_client_tool_comes_back(url):
    remember = {"type": "function", "name": "remember", "parameters": REMEMBER["input_schema"]}
    resp = oai(url).responses.create(model=MODEL, input="Remember the number 7.", max_output_tokens=120,
                                     tools=[*CALC, remember], tool_choice={"type": "function", "name": "remember"})
    (call,) = [item for item in resp.output if item.type == "function_call"]
    assert call.name == "remember" and resp.model_extra["mcp_calls"] == []


@pytest.mark.parametrize(("extra", "param"), [
    ({"server_url": "https://example.com/mcp"}, "tools.0.server_url"),
    ({"server_label": "nope"}, "tools.0.server_label"),
    ({"require_approval": "always"}, "tools.0.require_approval"),
])
def test_responses_bad_mcp_tool(url, extra, param):
    with pytest.raises(openai.BadRequestError) as info:
        oai(url).responses.create(model=MODEL, input="hi", max_output_tokens=8, tools=[{**CALC[0], **extra}])
    assert info.value.param == param, info.value


# ---- /v1/chat/completions, streamed ----------------------------------------------------------


@pytest.mark.slow  # a long end-to-end run: the slow step
def test_chat_streamed_carries_mcp_calls_in_the_last_chunk(url):
    chunks = list(oai(url).chat.completions.create(
        model=MODEL, messages=QUESTION, max_tokens=160, stream=True, extra_body={"mcp": True},
        tool_choice={"type": "function", "function": {"name": "calc__add"}}))
    last = chunks[-1]
    called = [tc.function.name for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or []
              if tc.function and tc.function.name]
    no_hub_call_returned(called, last.choices[0].finish_reason, ("stop", "length"), "tool_calls")  # the server ran it
    (call, *_) = last.model_extra["mcp_calls"]
    args = json.loads(call["arguments"])  # the tool's schema allows more keys than a and b: the server ignores them
    assert call["name"] == "calc__add" and call["result"] == str(args["a"] + args["b"])


@pytest.mark.slow  # a long end-to-end run: the slow step
def test_chat_streamed_round_limit(serve, tmp_path):
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"calc": calc_stdio(allow=["add"])}}))
    url = serve(mcp_config=str(config), mcp_max_rounds=1)
    call = '<tool_call>\n{"name": "calc__add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
    chunks = list(oai(url).chat.completions.create(
        model=MODEL, messages=QUESTION, max_tokens=40, stream=True,
        extra_body={"mcp": True, "structured_outputs": {"regex": _regex_literal(call)}}))
    last = chunks[-1]
    assert last.choices[0].finish_reason == "length"
    assert [c["result"] for c in last.model_extra["mcp_calls"]] == ["5"]
    assert "limit of 1 round" in last.model_extra["mcp_note"]
