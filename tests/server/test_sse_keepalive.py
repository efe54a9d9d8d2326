"""`serve --sse-ping-interval`: a streamed response that waits (queued, prefilling) gets keep-alives.

A StepGate holds the engine (the real SmolLM2) before its next step, so a streamed request sits
in the queue with nothing to send. Its raw SSE bytes are read until PINGS keep-alives have come
(an SSE comment on the OpenAI APIs, Anthropic's ping event on /v1/messages); then the engine goes
on, the stream must end normally, and the bytes, pings and all, must parse with the official
SDKs' stream helpers. With interval 0 no ping is sent, and the 200 still comes at once.
"""

from __future__ import annotations

import httpx
import pytest

from mlxctl.engine.engine import Engine, EngineConfig
from tests.engine.gate import StepGate
from tests.server.infra import MODEL, served

INTERVAL_S, PINGS = 0.2, 3
COMMENT, ANTHROPIC_PING = b": ping\n\n", b'event: ping\ndata: {"type": "ping"}\n\n'
# Responses keep-alives are events (Codex's idle timer does not count comments); the stream's
# opening sends one response.in_progress already
IN_PROGRESS = b"event: response.in_progress\n"
MESSAGES = [{"role": "user", "content": "Say hi."}]
BASE = {"model": MODEL, "max_tokens": 4, "temperature": 0, "stream": True}
BODIES = {
    "/v1/chat/completions": {**BASE, "messages": MESSAGES},
    "/v1/completions": {**BASE, "prompt": "Once upon a time"},
    "/v1/responses": {"model": MODEL, "input": "Say hi.", "max_output_tokens": 4, "temperature": 0, "stream": True},
    "/v1/messages": {**BASE, "messages": MESSAGES},
}


@pytest.fixture(scope="module")
def gated(smollm2):
    """(engine, gate): a SmolLM2 engine whose gate each test arms with ``gate.hold_next``."""
    from mlxctl.models.loader import load_model

    gate = StepGate(hold=lambda: False)
    engine = Engine(lambda: load_model(smollm2.path), EngineConfig(fault_hook=gate)).start()
    yield engine, gate
    gate.release()
    engine.shutdown()


def held(gate: StepGate) -> StepGate:
    gate.hold_next(lambda: True)  # the next step waits: whatever is submitted now stays queued
    return gate


def read_until(chunks, raw: bytearray, marker: bytes, count: int) -> None:
    """Read the stream's bytes into ``raw`` until ``marker`` has come ``count`` times."""
    while raw.count(marker) < count:
        raw += next(chunks)


def stream_while_held(url: str, path: str, gate: StepGate, marker: bytes,
                      count: int = PINGS) -> tuple[httpx.Response, bytes]:
    """The raw bytes of a streamed ``path`` that waited for ``count`` markers before the engine went on."""
    held(gate)
    raw = bytearray()
    with httpx.stream("POST", url + path, json=BODIES[path], timeout=120) as r:  # a hang is a failure
        chunks = r.iter_raw()
        try:
            read_until(chunks, raw, marker, count)
        finally:
            gate.release()
        for chunk in chunks:
            raw += chunk
    return r, bytes(raw)


def replay(raw: bytes, http=httpx):
    """An ``http`` (httpx, or the anthropic SDK's httpx2) client that answers every request with
    ``raw`` as an SSE stream, for the SDKs."""
    sse = {"content-type": "text/event-stream"}
    return http.Client(transport=http.MockTransport(lambda request: http.Response(200, headers=sse, content=raw)))


def openai_sdk(raw: bytes):
    import openai

    return openai.OpenAI(base_url="http://replay/v1", api_key="x", max_retries=0, http_client=replay(raw))


def parse_chat(raw: bytes) -> str:
    with openai_sdk(raw).chat.completions.stream(model=MODEL, messages=MESSAGES) as stream:
        kinds = {event.type for event in stream}  # get_final_completion() refuses finish_reason length
        done = stream.current_completion_snapshot
    assert "content.done" in kinds
    assert done.choices[0].finish_reason in ("length", "stop")
    return done.choices[0].message.content


def parse_completions(raw: bytes) -> str:
    chunks = list(openai_sdk(raw).completions.create(model=MODEL, prompt="x", stream=True))
    assert chunks[-1].choices[0].finish_reason in ("length", "stop")
    return "".join(c.choices[0].text for c in chunks if c.choices)


def parse_responses(raw: bytes) -> str:
    with openai_sdk(raw).responses.stream(model=MODEL, input="x") as stream:
        events = list(stream)  # get_final_response() wants response.completed; 4 tokens end incomplete
    assert events[-1].type in ("response.completed", "response.incomplete")
    return events[-1].response.output_text


def parse_messages(raw: bytes) -> str:
    import anthropic
    import httpx2

    sdk = anthropic.Anthropic(base_url="http://replay", api_key="x", max_retries=0, http_client=replay(raw, httpx2))
    with sdk.messages.stream(model=MODEL, max_tokens=4, messages=MESSAGES) as stream:
        done = stream.get_final_message()
    assert done.stop_reason in ("max_tokens", "end_turn")
    return "".join(block.text for block in done.content if block.type == "text")


CASES = [
    ("/v1/chat/completions", COMMENT, parse_chat, (b"data: [DONE]\n\n",)),
    ("/v1/completions", COMMENT, parse_completions, (b"data: [DONE]\n\n",)),
    ("/v1/responses", IN_PROGRESS, parse_responses, (b"event: response.completed\n", b"event: response.incomplete\n")),
    ("/v1/messages", ANTHROPIC_PING, parse_messages, (b"event: message_stop\n",)),
]


@pytest.mark.parametrize(("path", "marker", "parse", "last"), CASES, ids=[c[0] for c in CASES])
def test_a_queued_stream_gets_pings_then_completes_and_parses(gated, path, marker, parse, last):
    _, gate = gated
    with served(gated[0], sse_ping_interval_s=INTERVAL_S) as url:
        opening = int(marker == IN_PROGRESS)
        r, raw = stream_while_held(url, path, gate, marker, PINGS + opening)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    assert raw.count(marker) >= PINGS + opening
    assert any(end in raw for end in last)  # the stream ran to its normal end
    assert parse(raw)  # the SDK read past every ping to the finished reply


def test_interval_zero_sends_no_pings_and_the_status_still_comes_at_once(gated):
    """While one request collects pings (so the engine is held a while), another on a server with
    interval 0 has already got its 200 and headers, and gets no ping at all; /v1/completions
    sends no event before its first token, so its headers came alone."""
    engine, gate = gated
    with served(engine, sse_ping_interval_s=0) as quiet, served(engine, sse_ping_interval_s=INTERVAL_S) as pinging:
        held(gate)
        with httpx.stream("POST", quiet + "/v1/completions", json=BODIES["/v1/completions"], timeout=120) as r:
            assert r.status_code == 200  # the headers came while the engine is held
            pinged = bytearray()
            with httpx.stream("POST", pinging + "/v1/completions", json=BODIES["/v1/completions"],
                              timeout=120) as other:
                try:
                    read_until(other.iter_raw(), pinged, COMMENT, PINGS)
                finally:
                    gate.release()
            raw = r.read()
    assert b"ping" not in raw
    assert raw.endswith(b"data: [DONE]\n\n")
    assert parse_completions(raw)
