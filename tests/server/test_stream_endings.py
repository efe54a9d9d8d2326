"""How streams end on /v1/messages, /v1/responses and /v1/completions.

A client that leaves mid-stream aborts its generation (counted as an abort, the engine idle
again); a drain ends an open stream with the protocol's terminal event: Anthropic's
``message_delta`` + ``message_stop`` when the request finishes within the grace period, else an
``error`` event (``overloaded_error``); the Responses API's ``response.completed`` /
``response.incomplete``, else an ``error`` event. (Chat completions: test_infra_drain.py and
test_infra_status.py.)
"""
# ruff: noqa: F811 (the drainable `server` fixture is imported from test_infra_drain and used as an argument)

from __future__ import annotations

import json

import anthropic
import httpx
import pytest

from mlxctl.server.lifecycle import drain
from tests.server.infra import MODEL, idle, wait_until
from tests.server.test_infra_drain import aborted, idle_engine, server  # noqa: F401 (a fixture)

LONG = "Count from 1 to 1000, separated by commas."  # greedy: goes on far past the first events
ROOM = 120  # a drain grace a short stream ends well within: a backstop, as the drain ends with it


def messages_body(max_tokens: int) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": LONG}], "max_tokens": max_tokens,
            "temperature": 0, "stream": True}


def responses_body(max_tokens: int) -> dict:
    return {"model": MODEL, "input": LONG, "max_output_tokens": max_tokens, "temperature": 0, "stream": True}


def completions_body(max_tokens: int) -> dict:
    return {"model": MODEL, "prompt": "1, 2, 3,", "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "ignore_eos": True}


# path, body, and a test for the SSE data line that shows text is flowing
ENDPOINTS = {
    "messages": ("/v1/messages", messages_body, lambda data: data.get("type") == "content_block_delta"),
    "responses": ("/v1/responses", responses_body, lambda data: data.get("type") == "response.output_text.delta"),
    "completions": ("/v1/completions", completions_body, lambda data: bool(data["choices"][0]["text"])),
}


def read_events(lines, until=None) -> list[tuple[str | None, dict]]:
    """(event name, data) pairs from SSE lines, up to and including the first one ``until``
    accepts (or to the end of the stream)."""
    out, name = [], None
    for line in lines:
        if line.startswith("event: "):
            name = line[len("event: "):]
        elif line.startswith("data: ") and line != "data: [DONE]":
            out.append((name, json.loads(line[len("data: "):])))
            name = None
            if until is not None and until(out[-1][1]):
                return out
    return out


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_leaving_mid_stream_aborts_the_generation(base_url, engine, endpoint):
    path, body, flowing = ENDPOINTS[endpoint]
    with httpx.stream("POST", f"{base_url}{path}", json=body(2000), timeout=60) as r:
        assert r.status_code == 200
        lines = r.iter_lines()  # kept: a dropped line iterator closes the connection on its own
        events = read_events(lines, until=flowing)
        assert events and flowing(events[-1][1])
        during = httpx.get(f"{base_url}/v1/status").json()
    # leaving the block closes the connection with the reply far from done
    assert during["http"]["generations"] == 1 and during["engine"]["num_running"] == 1, during
    assert wait_until(lambda: idle(base_url)), httpx.get(f"{base_url}/v1/status").json()
    assert wait_until(lambda: httpx.get(f"{base_url}/v1/status").json()["http"]["generations"] == 0)
    assert len(engine.batch) == 0
    assert wait_until(lambda: aborted(base_url) == 1)  # the request was abandoned, not finished


def drained(server, grace: float, path: str, body: dict) -> list[tuple[str | None, dict]]:
    """Open a stream, drain the server once text flows, return every event the stream sent."""
    srv = server(drain_grace_s=grace)
    with httpx.stream("POST", f"{srv.url}{path}", json=body, timeout=60) as r:
        lines = r.iter_lines()
        events = read_events(lines, until=lambda data: "delta" in data.get("type", ""))
        draining = srv.submit(drain(srv.app))
        assert wait_until(lambda: httpx.get(f"{srv.url}/health").status_code == 503)
        events += read_events(lines)
    draining.result(60)
    assert wait_until(lambda: idle_engine(srv))
    return events


def test_drain_ends_an_open_messages_stream_with_an_error_event(server):
    events = drained(server, 0.5, "/v1/messages", messages_body(2000))
    assert all(name == data["type"] for name, data in events)
    names = [name for name, _ in events]
    assert names[:3] == ["message_start", "content_block_start", "ping"] and "content_block_delta" in names
    assert names[-1] == "error" and "message_stop" not in names and "message_delta" not in names
    error = events[-1][1]["error"]
    assert error["type"] == "overloaded_error" and "shutting down" in error["message"]


def test_drain_lets_a_short_messages_stream_finish_with_message_stop(server):
    events = drained(server, ROOM, "/v1/messages", messages_body(12))
    names = [name for name, _ in events]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert "error" not in names
    final = events[-2][1]
    assert final["delta"]["stop_reason"] == "max_tokens" and final["usage"]["output_tokens"] == 12


def test_drain_ends_an_open_responses_stream_with_response_failed(server):
    """As the Responses API ends a stream whose generation failed: response.failed, the response
    with status "failed" and its error."""
    events = drained(server, 0.5, "/v1/responses", responses_body(2000))
    assert all(name == data["type"] for name, data in events)
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    names = [name for name, _ in events]
    assert names[:2] == ["response.created", "response.in_progress"] and "response.output_text.delta" in names
    assert names[-1] == "response.failed"
    assert not {"response.completed", "response.incomplete", "error"} & set(names)
    response = events[-1][1]["response"]
    assert response["status"] == "failed"
    assert response["error"]["code"] == "server_error" and "shutting down" in response["error"]["message"]


def test_drain_lets_a_short_responses_stream_finish_with_its_final_event(server):
    events = drained(server, ROOM, "/v1/responses", responses_body(12))
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    name, final = events[-1]
    assert name == "response.incomplete" and "error" not in [n for n, _ in events]
    response = final["response"]
    assert response["status"] == "incomplete" and response["incomplete_details"]["reason"] == "max_output_tokens"
    assert response["usage"]["output_tokens"] == 12


def test_the_anthropic_sdk_sees_a_drained_stream_fail(server):
    """What an SDK user gets from the error event: an exception, not a silently short reply."""
    srv = server(drain_grace_s=0.5)
    client = anthropic.Anthropic(base_url=srv.url, api_key="x", max_retries=0)
    body = messages_body(2000)
    draining = []
    with (pytest.raises(anthropic.APIStatusError, match="shutting down"),
          client.messages.stream(model=MODEL, messages=body["messages"], max_tokens=2000,
                                 extra_body={"temperature": 0}) as stream):
        for event in stream:
            if event.type == "content_block_delta":
                draining.append(srv.submit(drain(srv.app)))
                break
        list(stream)  # the rest: the error event raises
    assert len(draining) == 1
    draining[0].result(60)
