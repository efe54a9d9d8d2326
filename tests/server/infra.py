"""Helpers for the infrastructure tests: a chat body, polling, SSE reading."""

from __future__ import annotations

import contextlib
import socket
import time

import httpx
import pytest

MODEL = "smollm2-135m"


def chat_body(max_tokens: int = 8, stream: bool = False, content: str = "Count from one to fifty.",
              **extra) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens,
            "stream": stream, "temperature": 0, **extra}


def long_stream_body(max_tokens: int = 2000) -> dict:
    """A streamed reply that goes on until the client leaves (or max_tokens)."""
    return chat_body(max_tokens=max_tokens, stream=True, ignore_eos=True)


def require_chat(url: str) -> None:
    """Skip unless the server has /v1/chat/completions (built by another part of the project)."""
    r = httpx.post(f"{url}/v1/chat/completions", json={}, timeout=30)
    if r.status_code == 404:
        pytest.skip("/v1/chat/completions is not routed yet")


def wait_until(predicate, timeout: float = 60.0, interval: float = 0.05):
    """Poll ``predicate`` until it is true (its value) or ``timeout`` passes (its last value).

    For server state that no event announces; ``timeout`` is a deadlock backstop, never the thing
    a test checks, so keep it generous: a loaded machine may take long to get there.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(interval)
    return predicate()


def idle(url: str) -> bool:
    engine = httpx.get(f"{url}/v1/status").json()["engine"]
    return not (engine["waiting"] or engine["prefilling"] or engine["running"] or engine["batch_size"])


def sse_data(lines) -> list[str]:
    """The data payloads of the SSE lines read so far."""
    return [line[len("data: "):] for line in lines if line.startswith("data: ")]


def sse_events(url: str, body: dict) -> list[tuple[str | None, dict]]:
    """POST ``body`` with streaming on and return the (event name, data) pairs received."""
    import json

    import httpx

    out, name = [], None
    with httpx.stream("POST", url, json=body, timeout=60) as r:
        for line in r.iter_lines():
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                out.append((name, json.loads(line[len("data: "):])))
    return out


def without_keepalives(kinds: list[str]) -> list[str]:
    """A Responses stream's event types without its keep-alives: every ``response.in_progress``
    after the first (sent while a loaded machine prefills longer than --sse-ping-interval)."""
    first = kinds.index("response.in_progress") if "response.in_progress" in kinds else len(kinds)
    return [k for i, k in enumerate(kinds) if i <= first or k != "response.in_progress"]


def raw_connection(url: str, timeout: float = 60.0) -> socket.socket:
    """A plain TCP connection to the server at ``url``, for bytes no HTTP client would send;
    reads give up after ``timeout`` (a generous bound, never a wait for something to happen)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=timeout)


def read_to_eof(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def raw_exchange(url: str, request: bytes) -> tuple[int, bytes]:
    """Send ``request`` as it is (it should say ``Connection: close``) and read the reply until
    the server closes: (status, body)."""
    with raw_connection(url) as sock:
        sock.sendall(request)
        reply = read_to_eof(sock)
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


@contextlib.contextmanager
def served(engine, **settings):
    """A real server over ``engine`` on a loopback port (ServeSettings fields as keywords); its URL."""
    from mlxctl.server.app import init_app
    from mlxctl.server.runner import BackgroundServer
    from mlxctl.server.settings import ServeSettings

    server = BackgroundServer(init_app(engine, ServeSettings(model_name=MODEL, **settings))).start()
    try:
        yield server.url
    finally:
        server.stop()


def openai_client(url: str):
    import openai

    return openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)


def anthropic_client(url: str):
    import anthropic

    return anthropic.Anthropic(base_url=url, api_key="x", max_retries=0)
