"""A tiny OpenAI-compatible server for bench-serve tests: fixed replies, fixed delays.

It streams one word per chunk: the first after ``first_delay`` seconds, the rest every
``token_delay``; ``max_tokens`` words with ``ignore_eos``, else the reply (finish "stop")
or max_tokens words (finish "length"), whichever is shorter. It serves /v1/models and a
Prometheus /metrics, and can refuse ``ignore_eos`` with a 400 as a strict server would.
It counts the requests in flight (``most_in_flight``: the most at once), and with ``together``
holds every answer until that many have been in flight at once.
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass

from aiohttp import web

REPLY = "The capital of France is Paris .".split()


@dataclass
class FakeSettings:
    first_delay: float = 0.03
    token_delay: float = 0.002
    refuse_ignore_eos: bool = False
    model: str = "fake-model"
    metrics: bool = True
    together: int = 0  # hold every answer until this many requests have been in flight at once


class FakeServer:
    """The fake in a background thread with its own event loop; ``url`` once started."""

    def __init__(self, settings: FakeSettings | None = None):
        self.settings = settings or FakeSettings()
        self.counters = {"queries": 0, "hits": 0, "requests": 0}
        self.url = ""
        self.in_flight = self.most_in_flight = 0
        self._together: asyncio.Event | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    def __enter__(self) -> FakeServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(60)
        return self

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(60)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(60)

    async def _start(self) -> None:
        self._together = asyncio.Event()
        app = web.Application()
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/v1/chat/completions", self.complete)
        app.router.add_post("/v1/completions", self.complete)
        if self.settings.metrics:
            app.router.add_get("/metrics", self.metrics)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    async def models(self, request: web.Request) -> web.Response:
        body = {"object": "list", "data": [{"id": self.settings.model, "object": "model"}]}
        return web.json_response(body, headers={"Server": "fake/1.0"})

    async def metrics(self, request: web.Request) -> web.Response:
        c = self.counters
        text = (
            "# TYPE mlxctl:prefix_cache_queries_total counter\n"
            f"mlxctl:prefix_cache_queries_total {c['queries']}.0\n"
            f"mlxctl:prefix_cache_hits_total {c['hits']}.0\n"
            f'mlxctl:request_success_total{{finished_reason="stop"}} {c["requests"]}.0\n'
            "mlxctl:num_requests_waiting 0.0\n"
        )
        return web.Response(text=text, content_type="text/plain")

    async def complete(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if self.settings.refuse_ignore_eos and "ignore_eos" in body:
            return web.json_response({"error": {"message": "unknown field: ignore_eos"}}, status=400)
        chat = request.path.endswith("/chat/completions")
        words, finish = _words(body)
        self.counters["queries"] += 10
        self.counters["hits"] += 4
        self.counters["requests"] += 1
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        self._arrive()
        try:
            await self._together.wait()
            await self._stream(response, chat, words, finish, body)
        finally:
            self.in_flight -= 1  # before the client sees the end, so its next request comes after
        await response.write(b"data: [DONE]\n\n")
        return response

    def _arrive(self) -> None:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        if self.in_flight >= self.settings.together:
            self._together.set()

    async def _stream(self, response, chat: bool, words: list[str], finish: str, body: dict) -> None:
        if chat:
            await _send(response, {"choices": [{"index": 0, "delta": {"role": "assistant"}}]})
        await asyncio.sleep(self.settings.first_delay)
        for index, word in enumerate(words):
            if index:
                await asyncio.sleep(self.settings.token_delay)
            piece = (" " if index else "") + word
            choice = {"index": 0, "delta": {"content": piece}} if chat else {"index": 0, "text": piece}
            await _send(response, {"choices": [choice]})
        last = {"index": 0, "delta": {}, "finish_reason": finish} if chat else {"index": 0, "text": "", "finish_reason": finish}
        await _send(response, {"choices": [last]})
        if (body.get("stream_options") or {}).get("include_usage"):
            prompt = _prompt_tokens(body)
            usage = {"prompt_tokens": prompt, "completion_tokens": len(words), "total_tokens": prompt + len(words)}
            await _send(response, {"choices": [], "usage": usage})


def _words(body: dict) -> tuple[list[str], str]:
    limit = int(body.get("max_tokens") or 16)
    if body.get("ignore_eos"):
        return [REPLY[i % len(REPLY)] for i in range(limit)], "length"
    return REPLY[:limit], "stop" if limit >= len(REPLY) else "length"


def _prompt_tokens(body: dict) -> int:
    text = body.get("prompt") or " ".join(m.get("content", "") for m in body.get("messages", []))
    return len(text.split()) + (5 if "messages" in body else 0)


async def _send(response: web.StreamResponse, data: dict) -> None:
    await response.write(f"data: {json.dumps(data)}\n\n".encode())
