"""POST /v1/messages and /v1/messages/count_tokens through the official `anthropic` client."""

from __future__ import annotations


import anthropic
import httpx
import pytest
from tests.server.infra import sse_events

MODEL = "smollm2-135m"
PARIS = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
GREEDY = {"temperature": 0}  # this SDK release no longer takes sampling parameters as arguments


@pytest.fixture
def client(base_url) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=base_url, api_key="x", max_retries=0)


def test_message_answers_paris(client):
    msg = client.messages.create(model=MODEL, messages=PARIS, max_tokens=12, extra_body=GREEDY)
    assert "Paris" in msg.content[0].text
    assert msg.stop_reason in ("end_turn", "max_tokens")
    assert msg.usage.input_tokens > 0 and msg.usage.output_tokens > 0
    # reuse depends on what the session's shared server ran before: reported, never the last token
    assert msg.usage.cache_read_input_tokens >= 0 and msg.usage.cache_creation_input_tokens == 0


def test_stream_gives_the_same_text_and_a_final_message(client):
    plain = client.messages.create(model=MODEL, messages=PARIS, max_tokens=12, extra_body=GREEDY)
    with client.messages.stream(model=MODEL, messages=PARIS, max_tokens=12, extra_body=GREEDY) as stream:
        streamed = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert streamed == plain.content[0].text == final.content[0].text
    assert final.stop_reason == plain.stop_reason
    assert final.usage.output_tokens == plain.usage.output_tokens


def _sse_events(base_url: str, body: dict) -> list[tuple[str, dict]]:
    return sse_events(f"{base_url}/v1/messages", body)


def test_raw_sse_event_order(base_url):
    body = {"model": MODEL, "messages": PARIS, "max_tokens": 6, "temperature": 0, "stream": True}
    seen = _sse_events(base_url, body)
    assert all(name == data["type"] for name, data in seen)
    names = [name for name, _ in seen]
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert set(names[3:-3]) == {"content_block_delta"}
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert seen[0][1]["message"]["content"] == []
    assert seen[-2][1]["delta"]["stop_reason"] in ("end_turn", "max_tokens")


def test_stop_sequence_is_reported(client):
    plain = client.messages.create(model=MODEL, messages=PARIS, max_tokens=12, extra_body=GREEDY)
    stop = plain.content[0].text.strip().split()[0][:3]  # e.g. "The" or "Par"
    msg = client.messages.create(model=MODEL, messages=PARIS, max_tokens=12, extra_body=GREEDY,
                                 stop_sequences=["zzz", stop])
    assert msg.stop_reason == "stop_sequence"
    assert msg.stop_sequence == stop
    assert stop not in msg.content[0].text


def test_max_tokens_is_reported(client):
    msg = client.messages.create(model=MODEL, messages=PARIS, max_tokens=2, extra_body=GREEDY)
    assert msg.stop_reason == "max_tokens"
    assert msg.usage.output_tokens == 2


def test_count_tokens_matches_a_real_request(client):
    system = "You are terse."
    counted = client.messages.count_tokens(model=MODEL, messages=PARIS, system=system)
    msg = client.messages.create(model=MODEL, messages=PARIS, system=system, max_tokens=1)
    assert counted.input_tokens == msg.usage.input_tokens


def test_system_as_text_blocks_and_content_blocks(client):
    as_string = client.messages.count_tokens(model=MODEL, messages=PARIS, system="Be brief.")
    as_blocks = client.messages.count_tokens(
        model=MODEL, system=[{"type": "text", "text": "Be brief."}],
        messages=[{"role": "user", "content": [{"type": "text", "text": PARIS[0]["content"]}]}])
    assert as_string.input_tokens == as_blocks.input_tokens


def test_unknown_field_is_a_400_naming_it(client):
    with pytest.raises(anthropic.BadRequestError) as err:
        client.messages.create(model=MODEL, messages=PARIS, max_tokens=4, extra_body={"frobnicate": 1})
    assert err.value.body["error"]["type"] == "invalid_request_error"
    assert "frobnicate" in err.value.body["error"]["message"]


@pytest.mark.parametrize("extra, named", [
    ({"tools": [{"name": "f"}]}, "input_schema"),
    ({"tools": [{"name": "f", "input_schema": {"type": "object"}}], "tool_choice": {"type": "tool", "name": "g"}}, "'g'"),
    ({"thinking": {"type": "enabled", "budget_tokens": 1024}}, "thinking"),
    ({"messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]}]},
     "image"),
])
def test_unsupported_features_are_a_400_naming_them(base_url, extra, named):
    body = {"model": MODEL, "messages": PARIS, "max_tokens": 4, **extra}
    r = httpx.post(f"{base_url}/v1/messages", json=body)
    assert r.status_code == 400
    assert r.json()["type"] == "error" and named in r.json()["error"]["message"]


def test_missing_max_tokens_is_a_400(base_url):
    r = httpx.post(f"{base_url}/v1/messages", json={"model": MODEL, "messages": PARIS})
    assert r.status_code == 400
    assert r.json()["error"] == {"type": "invalid_request_error", "message": r.json()["error"]["message"]}
    assert "max_tokens" in r.json()["error"]["message"]


def test_unknown_model_is_a_404(client):
    with pytest.raises(anthropic.NotFoundError) as err:
        client.messages.create(model="claude-nope", messages=PARIS, max_tokens=4)
    assert err.value.body["error"]["type"] == "not_found_error"
    assert "claude-nope" in err.value.body["error"]["message"]


def test_malformed_json_is_a_400(base_url):
    r = httpx.post(f"{base_url}/v1/messages", content=b"{not json",
                   headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert r.json()["type"] == "error"
    assert r.json()["error"]["type"] == "invalid_request_error"


def test_a_final_assistant_message_is_a_prefill_the_reply_continues(client):
    prefill = [*PARIS, {"role": "assistant", "content": "The capital of France is"}]
    msg = client.messages.create(model=MODEL, messages=prefill, max_tokens=3, extra_body=GREEDY)
    assert "Paris" in msg.content[0].text
    assert "capital" not in msg.content[0].text


def test_streamed_usage_reports_cache_reads_like_the_plain_response(client):
    system = "You answer questions about European capitals in one short sentence. " * 6
    kw = dict(model=MODEL, system=system, messages=PARIS, max_tokens=6, extra_body=GREEDY)
    client.messages.create(**kw)  # the prompt's blocks are cached now
    plain = client.messages.create(**kw)
    with client.messages.stream(**kw) as stream:
        streamed = stream.get_final_message()
    assert plain.usage.cache_read_input_tokens >= 64
    assert streamed.usage.cache_read_input_tokens == plain.usage.cache_read_input_tokens
    assert streamed.usage.input_tokens == plain.usage.input_tokens
