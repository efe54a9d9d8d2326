"""`serve --warm-prompts-concurrency N`: at most N warm prompts are in the engine at once.

A real engine (a tiny random llama with a character tokenizer) runs the prompts; its ``submit``
is wrapped to count the prompts submitted and not finished yet, so the peak is what the engine
was given at once. Run directly through ``warm()`` and through a real server's start-up path
(``lifecycle.start_warmup`` with the settings the CLI fills), its progress read over HTTP.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time

import httpx
import pytest

from mlxctl.engine.engine import Engine, EngineConfig
from mlxctl.engine.prefix_config import PrefixConfig
from mlxctl.server.app import init_app
from mlxctl.server.runner import BackgroundServer
from mlxctl.server.settings import ServeSettings
from mlxctl.server.warm import WarmProgress, load_warm_prompts, warm
from tests.engine.tiny import CharTokenizer, TinyModel, tiny_llama

NUM_PROMPTS = 7


class EncodingTokenizer(CharTokenizer):
    """Letters to ids and back (ids 1..26), enough for raw-text warm prompts."""

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return [ord(c) % 26 + 1 for c in text]


class InFlightCounter:
    """Counts the prompts the engine holds: +1 at submit, -1 when the stream has ended."""

    def __init__(self, submit):
        self._submit, self.now, self.peak, self.submitted = submit, 0, 0, 0

    def __call__(self, *args, **kwargs):
        stream = self._submit(*args, **kwargs)
        self.now += 1
        self.submitted += 1
        self.peak = max(self.peak, self.now)
        collect = stream.collect_async

        async def collect_async():
            try:
                return await collect()
            finally:
                self.now -= 1

        stream.collect_async = collect_async
        return stream


@pytest.fixture(scope="module")
def engine():
    loaded = TinyModel(model=tiny_llama(), tokenizer=EncodingTokenizer())
    eng = Engine(lambda: loaded, EngineConfig(prefix=PrefixConfig(block_size=4))).start()
    yield eng
    eng.shutdown()


@pytest.fixture
def warm_file(tmp_path):
    path = tmp_path / "warm.jsonl"
    lines = [json.dumps({"prompt": f"prompt number {i}: " + "the quick brown fox jumps over it " * (2 + i)})
             for i in range(NUM_PROMPTS)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("cap", [1, 2, 3])
def test_warm_never_has_more_than_the_cap_in_flight(engine, warm_file, monkeypatch, cap):
    counter = InFlightCounter(engine.submit)
    monkeypatch.setattr(engine, "submit", counter)
    progress = asyncio.run(warm(engine, load_warm_prompts(warm_file), cap, WarmProgress()))
    assert progress.done == NUM_PROMPTS and progress.failed == 0 and not progress.running
    assert counter.submitted == NUM_PROMPTS and counter.now == 0
    assert counter.peak == cap  # never more, and the cap is used: not one at a time


def test_the_server_warms_with_its_configured_concurrency(engine, warm_file, monkeypatch):
    from mlxctl.server.lifecycle import start_warmup

    counter = InFlightCounter(engine.submit)
    monkeypatch.setattr(engine, "submit", counter)
    settings = dataclasses.replace(ServeSettings(model_name="tiny-llama"),
                                   warm_prompts=tuple(load_warm_prompts(warm_file)), warm_prompts_concurrency=2)
    server = BackgroundServer(init_app(engine, settings)).start()
    try:
        async def begin():
            start_warmup(server.app)

        server.submit(begin()).result(30)
        deadline, status = time.monotonic() + 120, {}
        while time.monotonic() < deadline:
            status = httpx.get(f"{server.url}/v1/status", timeout=10).json()["warm_prompts"]
            if status["done"] == NUM_PROMPTS and not status["running"]:
                break
            time.sleep(0.05)
    finally:
        server.stop()
    assert status["done"] == NUM_PROMPTS and status["failed"] == 0 and status["total"] == NUM_PROMPTS
    assert status["prompt_tokens"] > 0
    assert counter.peak == 2


def test_the_default_concurrency_is_small():
    assert 1 <= ServeSettings().warm_prompts_concurrency <= 4
