"""Draining and time limits, in process: every open stream ends with a terminal event."""

from __future__ import annotations

import httpx
import pytest

from mlxctl.server.app import init_app
from mlxctl.server.lifecycle import drain
from mlxctl.server.runner import BackgroundServer
from mlxctl.server.settings import ServeSettings
from tests.server.infra import (
    MODEL,
    chat_body,
    idle,
    long_stream_body,
    require_chat,
    sse_data,
    wait_until,
)
from tests.server.test_infra_metrics import samples

ABORTED = ("mlxctl:request_success_total", (("finished_reason", "abort"),))


@pytest.fixture
def server(engine):
    """A server whose app the test can drain; started per test with its settings."""
    servers = []

    def start(**settings) -> BackgroundServer:
        server = BackgroundServer(init_app(engine, ServeSettings(model_name=MODEL, **settings))).start()
        servers.append(server)
        require_chat(server.url)
        return server

    yield start
    for s in servers:
        s.stop()
    # the engine is shared: what a drain cut off must be gone before the next test looks at it
    assert wait_until(lambda: not engine.scheduler.has_work and len(engine.batch) == 0)


def test_drain_refuses_new_work_and_ends_open_streams(server):
    srv = server(drain_grace_s=0.5)
    with httpx.stream("POST", f"{srv.url}/v1/chat/completions", json=long_stream_body(), timeout=60) as r:
        lines = r.iter_lines()
        next(line for line in lines if line.startswith("data: "))
        draining = srv.submit(drain(srv.app))
        assert wait_until(lambda: httpx.get(f"{srv.url}/health").status_code == 503)
        refused = httpx.get(f"{srv.url}/v1/models")
        rest = sse_data(lines)
    assert refused.status_code == 503 and refused.headers["Retry-After"]
    assert "shutting down" in rest[-1] and '"error"' in rest[-1]
    draining.result(60)
    assert wait_until(lambda: idle_engine(srv))
    assert wait_until(lambda: aborted_in(srv) == 1)  # cut off, not generated to the end


def aborted(url: str) -> float:
    """Requests the server counts as abandoned (by the client, or at the time limit), not finished."""
    return samples(httpx.get(f"{url}/metrics").text).get(ABORTED, 0)


def aborted_in(srv) -> float:
    """aborted(), read from the app itself (a draining server answers /metrics with a 503)."""
    from prometheus_client import generate_latest

    from mlxctl.server.keys import STATE

    return samples(generate_latest(srv.app[STATE].metrics.registry).decode()).get(ABORTED, 0)


def idle_engine(srv) -> bool:
    from mlxctl.server.keys import ENGINE

    engine = srv.app[ENGINE]
    return not engine.scheduler.has_work and len(engine.batch) == 0


def test_drain_lets_short_requests_finish(server):
    srv = server(drain_grace_s=120)  # a backstop: the drain ends as the request does
    with httpx.stream("POST", f"{srv.url}/v1/chat/completions", json=long_stream_body(10), timeout=60) as r:
        lines = r.iter_lines()
        next(line for line in lines if line.startswith("data: "))
        draining = srv.submit(drain(srv.app))
        rest = sse_data(lines)
    assert rest[-1] == "[DONE]"
    draining.result(60)


def test_a_stream_past_the_time_limit_ends_with_an_error_event(server):
    srv = server(request_timeout_s=0.5)
    with httpx.stream("POST", f"{srv.url}/v1/chat/completions", json=long_stream_body(), timeout=60) as r:
        events = sse_data(r.iter_lines())
    assert "time limit" in events[-1] and '"error"' in events[-1]
    assert wait_until(lambda: idle(srv.url))
    assert wait_until(lambda: aborted(srv.url) == 1)  # cut off, not generated to the end


def test_a_plain_request_past_the_time_limit_is_a_504(server):
    srv = server(request_timeout_s=0.5)
    r = httpx.post(f"{srv.url}/v1/chat/completions", json=chat_body(max_tokens=2000, ignore_eos=True), timeout=60)
    assert r.status_code == 504
    assert "time limit" in r.json()["error"]["message"]
    assert wait_until(lambda: idle(srv.url))
    assert wait_until(lambda: aborted(srv.url) == 1)  # cut off, not generated to the end
