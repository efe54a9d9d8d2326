"""Issue 20: ``serve --memory-budget-gb`` counts every model, not only the primary: the pool's
models load under the same budget as the primary's weights and every engine's KV (one
MemoryLedger), an idle model is unloaded to make room for another's weights, and one is
unloaded when a request of another model waits for KV room it holds. Real model folders, real
loads, a real server on loopback."""

from __future__ import annotations

import httpx
import pytest

from mlxctl.cli.serve_models import EngineDefaults, ModelSpec, build_pool
from mlxctl.engine.engine import Engine, EngineConfig
from mlxctl.engine.memory import STEP, KVFootprint, MemoryLedger
from mlxctl.engine.prefix_config import PrefixConfig
from mlxctl.engine.wired import model_bytes
from mlxctl.models.inspect import loaded_weights_bytes
from mlxctl.models.loader import load_model
from mlxctl.server.app import init_app
from mlxctl.server.runner import BackgroundServer
from mlxctl.server.settings import ServeSettings
from tests.server.test_memory_serve import tiny
from tests.server.test_residency import PROMPT

NO_PREFIX = PrefixConfig(enabled=False)


@pytest.fixture(scope="module")
def sizes(tiny_folder):
    """(one pool model's weights, the KV one request of it reserves: its whole 256-token context)."""
    loaded = load_model(tiny_folder, dtype="auto")
    return loaded_weights_bytes(tiny_folder, "auto"), KVFootprint.of(loaded.model).bytes_for(STEP)


@pytest.fixture
def daemon(tiny_folder):
    """start(room) -> (url, pool, ledger): a pinned primary (a tiny random llama) and pool models
    "a" and "b" (the tiny folder), under one --memory-budget-gb of the primary's weights plus
    ``room`` bytes."""
    started = []

    def start(room: int):
        primary = tiny(context_length=512)
        ledger = MemoryLedger(model_bytes(primary.model) + room)
        config = EngineConfig(prefix=NO_PREFIX, memory_budget_bytes=ledger.total, memory_ledger=ledger)
        engine = Engine(lambda: primary, EngineConfig(prefix=NO_PREFIX, memory_budget_bytes=ledger.total,
                                                      memory_ledger=ledger, memory_pinned=True)).start()
        specs = [ModelSpec("a", str(tiny_folder)), ModelSpec("b", str(tiny_folder))]
        pool = build_pool(specs, 0, None, EngineDefaults("auto", "auto", None, config))
        server = BackgroundServer(init_app(engine, ServeSettings(model_name="primary"), pool)).start()
        started.append((server, pool, engine))
        return server.url, pool, ledger

    yield start
    for server, pool, engine in started:
        server.submit(pool.close()).result(30)
        server.stop()
        engine.shutdown()


def complete(url: str, model: str) -> httpx.Response:
    return httpx.post(f"{url}/v1/completions", timeout=120,
                      json={"model": model, "prompt": PROMPT, "max_tokens": 3, "temperature": 0})


def test_the_budget_counts_the_pool_models_and_an_idle_one_makes_room(daemon, sizes):
    one, request = sizes
    url, pool, ledger = daemon(one * 3 // 2 + request)  # one pool model and one request, not two models
    assert complete(url, "a").status_code == 200
    assert ledger.used() == sum(ledger.held.values()) and len(ledger.held) == 2  # the primary and "a"
    assert complete(url, "b").status_code == 200  # "a" was unloaded first
    assert pool.get("a").state == "unloaded" and pool.get("b").state == "ready" and len(ledger.held) == 2
    status = httpx.get(f"{url}/v1/status").json()
    assert status["engine"]["memory"]["budget_bytes"] == ledger.total


def test_a_pinned_model_that_holds_the_room_is_a_507_naming_the_memory_budget(daemon, sizes):
    one, request = sizes
    url, pool, _ = daemon(one * 3 // 2 + request)
    assert complete(url, "b").status_code == 200
    pool.get("b").pinned = True
    r = complete(url, "a")
    assert r.status_code == 507, r.text
    message = r.json()["error"]["message"]
    assert "--memory-budget-gb" in message and "'b'" in message and "(pinned)" in message


def test_a_request_waiting_for_kv_room_gets_an_idle_model_unloaded(daemon, sizes):
    one, request = sizes
    url, pool, ledger = daemon(2 * one + request - 1)  # both models' weights, then not one request's KV
    assert complete(url, "a").status_code == 200
    r = complete(url, "b")  # waits until the pool unloads the idle "a" (its reaper: reclaim)
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 3
    assert pool.get("a").state == "unloaded" and pool.get("b").state == "ready"
