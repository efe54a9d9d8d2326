"""The client and the runners against a fake server on loopback (real HTTP, no model)."""

from __future__ import annotations

import asyncio

import httpx

from mlxctl.bench.client import ServerClient
from mlxctl.bench.runner import closed_loop, on_schedule
from mlxctl.bench.spec import RequestSpec
from tests.bench.conftest import FIRST_DELAY
from tests.bench.fake_server import FakeServer, FakeSettings

SPEC = RequestSpec("s", prompt="one two three", max_tokens=12, ignore_eos=True)


def send_all(url: str, specs, endpoint: str = "chat", **run) -> tuple[list, float, ServerClient]:
    async def go():
        async with httpx.AsyncClient(timeout=60) as http:
            client = ServerClient(http, url, endpoint, "fake-model")
            if "arrivals" in run:
                results, wall = await on_schedule(client.send, specs, run["arrivals"], run.get("cap"))
            else:
                results, wall = await closed_loop(client.send, specs, run.get("concurrency", 1))
            return results, wall, client

    return asyncio.run(go())


def test_streamed_timings_and_usage(fake):
    (r,), _, client = send_all(fake.url, [SPEC])
    assert r.ok and r.finish_reason == "length"
    assert r.ttft >= FIRST_DELAY
    assert len(r.chunk_times) == 12 and r.completion_tokens == 12 and r.prompt_tokens == 8
    assert r.text.startswith("The capital of France")
    assert r.ignore_eos_sent and not client.refused


def test_completions_endpoint(fake):
    (r,), _, _ = send_all(fake.url, [RequestSpec("s", prompt="hi", max_tokens=3)], endpoint="completions")
    assert r.ok and r.text == "The capital of" and r.finish_reason == "length" and r.prompt_tokens == 1


def test_refused_ignore_eos_is_retried_without_and_remembered(slow_fake):
    results, _, client = send_all(slow_fake.url, [SPEC, SPEC])
    assert all(r.ok and not r.ignore_eos_sent for r in results)
    assert results[0].finish_reason == "stop" and results[0].completion_tokens == 7
    assert client.refused == {"ignore_eos"}


def test_closed_loop_keeps_order_and_concurrency():
    specs = [RequestSpec(f"s{i}", prompt="x", max_tokens=2) for i in range(8)]
    with FakeServer(FakeSettings(together=4)) as server:  # no answer until four are in flight at once
        results, _, _ = send_all(server.url, specs, concurrency=4)
    assert [r.name for r in results] == [s.name for s in specs] and all(r.ok for r in results)
    assert server.most_in_flight == 4  # four at once, never more


def test_schedule_waits_for_arrivals(fake):
    specs = [RequestSpec("s", prompt="x", max_tokens=1)] * 3
    results, wall, _ = send_all(fake.url, specs, arrivals=[0.0, 0.05, 0.1])
    assert all(r.ok for r in results) and wall >= 0.1 + FIRST_DELAY


def test_unreachable_server_is_a_connection_failure():
    (r,), _, _ = send_all("http://127.0.0.1:9", [SPEC])
    assert not r.ok and r.error_kind == "connection"


def test_http_error_status(fake):
    (r,), _, _ = send_all(fake.url + "/nowhere", [SPEC])
    assert r.error_kind == "http_404"
