"""--header-timeout and --max-connections: slow or idle clients are closed, a full server refuses.

Every wait is on a signal from the server (a reply, or the EOF of a connection it closed); the
sockets' own timeout is only a generous bound for a server that never sends one.
"""

from __future__ import annotations

import pytest

import json
import select
import signal
import subprocess
import sys

import httpx

from mlxctl.server.runner import free_port
from tests.cli.helpers import REPO, clean_env
from tests.server.infra import MODEL, chat_body, raw_connection, read_to_eof, sse_data, wait_until
from tests.server.test_infra_serve_cli import read_url

PARTIAL = b"GET /health HTTP/1.1\r\nHost: localhost\r\n"  # the blank line that ends the headers never comes


def closed_for_its_headers(url: str) -> None:
    """Open a connection that sends part of its headers and return once the server closes it."""
    with raw_connection(url) as sock:
        sock.sendall(PARTIAL)
        assert read_to_eof(sock) == b""


def test_headers_not_finished_by_the_deadline_are_closed(serve):
    url = serve(header_timeout_s=0.5)
    closed_for_its_headers(url)
    assert httpx.get(f"{url}/health").status_code == 200


def test_a_header_trickle_does_not_push_the_deadline_back(serve):
    url = serve(header_timeout_s=0.5)
    with raw_connection(url) as sock:
        sock.sendall(PARTIAL + b"X-Pad: ")
        for _ in range(1200):  # one byte per 50 ms: a minute of trickle at most
            if select.select([sock], [], [], 0.05)[0]:
                break
            sock.sendall(b"a")
        assert read_to_eof(sock) == b""


def test_an_idle_keep_alive_connection_is_closed(serve):
    url = serve(header_timeout_s=0.5)
    with raw_connection(url) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
        reply = read_to_eof(sock)
    assert reply.startswith(b"HTTP/1.1 200")


def test_a_body_still_arriving_after_the_deadline_is_read(serve):
    """The deadline is for headers: a body sent in two parts, the second once a later
    connection has been closed for its headers (so the deadline has passed), is answered."""
    url = serve(header_timeout_s=0.5)
    body = json.dumps({"model": MODEL, "prompt": "hello there"}).encode()
    with raw_connection(url) as sock:
        sock.sendall(b"POST /tokenize HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                     b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body[:10])
        closed_for_its_headers(url)
        sock.sendall(body[10:])
        reply = read_to_eof(sock)
    assert reply.startswith(b"HTTP/1.1 200"), reply[:200]
    assert b'"tokens"' in reply


@pytest.mark.slow  # a long end-to-end run: the slow step
def test_a_stream_outlives_the_deadline(serve):
    url = serve(header_timeout_s=0.5)
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=chat_body(max_tokens=200, stream=True,
                                                                          ignore_eos=True), timeout=120) as r:
        lines = r.iter_lines()
        next(line for line in lines if line.startswith("data: "))
        closed_for_its_headers(url)
        events = sse_data(lines)
    assert events[-1] == "[DONE]"


def test_past_the_connection_cap_a_new_connection_gets_503(serve):
    url = serve(max_connections=2, header_timeout_s=600)
    with raw_connection(url) as first, raw_connection(url):
        with raw_connection(url) as third:
            reply = read_to_eof(third)  # accepted after the other two: refused
        head, _, body = reply.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503") and b"Retry-After: 1" in head
        error = json.loads(body)
        assert error["type"] == "error" and "--max-connections" in error["error"]["message"]
        r = httpx.get(f"{url}/health")
        assert r.status_code == 503 and r.json()["error"]["type"] == "overloaded_error"
        first.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        assert read_to_eof(first).startswith(b"HTTP/1.1 200")  # it is released before its EOF is sent
        assert httpx.get(f"{url}/health").status_code == 200


@pytest.mark.slow  # over 5 s on CI's two cores
def test_serve_takes_both_flags(smollm2):
    """Through the real CLI: a partial header is closed; with one connection held by a stream,
    the next is refused, and served again once the stream ends."""
    port = free_port()
    args = [sys.executable, "-m", "mlxctl", "serve", "-m", str(smollm2.path), "--port", str(port),
            "--served-model-name", MODEL, "--header-timeout", "0.5", "--max-connections", "1", "--drain-grace", "1"]
    proc = subprocess.Popen(args, cwd=REPO, env=clean_env(), stderr=subprocess.PIPE, text=True)
    try:
        url = read_url(proc)
        assert wait_until(lambda: health(url) == 200, timeout=120, interval=0.25)
        closed_for_its_headers(url)
        body = chat_body(max_tokens=2000, stream=True, ignore_eos=True)
        with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=120) as r:
            lines = r.iter_lines()  # held: dropping it would close the stream
            next(line for line in lines if line.startswith("data: "))
            assert health(url) == 503
        assert wait_until(lambda: health(url) == 200, timeout=30)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def health(url: str) -> int:
    try:
        return httpx.get(f"{url}/health", timeout=5).status_code
    except httpx.TransportError:
        return 0
