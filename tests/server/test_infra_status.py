"""GET /v1/status while streams run, and after clients vanish mid-stream."""

from __future__ import annotations

import contextlib
import json
import socket
import threading

import httpx

from tests.server.infra import idle, long_stream_body, require_chat, wait_until
from tests.server.test_infra_drain import aborted


def test_status_when_idle(base_url):
    status = httpx.get(f"{base_url}/v1/status").json()
    assert status["model"] == "smollm2-135m" and status["loaded"] and not status["draining"]
    assert status["uptime_s"] >= 0
    assert {"waiting", "prefilling", "running", "batch_size", "kv_bytes"} <= set(status["engine"])
    assert "active_bytes" in status["memory"]


def test_status_shows_a_running_request_then_idle(base_url):
    require_chat(base_url)
    with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=long_stream_body(30), timeout=60) as r:
        lines = r.iter_lines()
        next(line for line in lines if line.startswith("data: "))
        status = httpx.get(f"{base_url}/v1/status").json()
        rest = [line for line in lines if line.startswith("data: ")]
    assert rest[-1] == "data: [DONE]"
    (running,) = status["engine"]["running"] + status["engine"]["prefilling"]
    assert running["prompt_tokens"] > 0 and running["max_new_tokens"] == 30
    assert status["engine"]["num_running"] == 1 and status["http"]["generations"] == 1
    assert wait_until(lambda: idle(base_url))


def _open_and_drop(url: str, started: threading.Barrier) -> None:
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=long_stream_body(), timeout=60) as r:
        for line in r.iter_lines():
            if line.startswith("data: "):
                json.loads(line[6:])
                break
        started.wait(timeout=60)
    # leaving the block closes the connection mid-stream


def test_disconnect_storm_leaves_the_engine_idle(serve, engine):
    url = serve()
    require_chat(url)
    barrier = threading.Barrier(8)
    threads = [threading.Thread(target=_open_and_drop, args=(url, barrier)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert wait_until(lambda: idle(url)), httpx.get(f"{url}/v1/status").json()
    assert len(engine.batch) == 0
    assert wait_until(lambda: aborted(url) == 8)  # abandoned, not finished
    assert wait_until(lambda: httpx.get(f"{url}/v1/status").json()["http"]["generations"] == 0)


@contextlib.contextmanager
def posted(url: str, path: str, body: dict):
    """POST ``body`` on a connection of its own, which leaving the block closes, the reply unread."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    data = json.dumps(body).encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n").encode()
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(head + data)
        yield


def generating(url: str) -> bool:
    return httpx.get(f"{url}/v1/status").json()["engine"]["num_running"] == 1


def test_a_plain_request_whose_client_leaves_is_aborted(base_url, engine):
    require_chat(base_url)
    with posted(base_url, "/v1/chat/completions", {**long_stream_body(), "stream": False}):
        assert wait_until(lambda: generating(base_url)), httpx.get(f"{base_url}/v1/status").json()
    # the connection closed with the 2000 tokens far from done
    assert wait_until(lambda: idle(base_url)), httpx.get(f"{base_url}/v1/status").json()
    assert len(engine.batch) == 0
    assert wait_until(lambda: aborted(base_url) == 1)  # abandoned, not finished
