"""Loading one model never blocks requests to another that is already resident: while a slow
model is being sized (fetched, headers read) and then loaded, requests to the primary model and
to a resident pool model keep completing, and /v1/models keeps answering."""

from __future__ import annotations

import concurrent.futures
import threading

import httpx
import pytest

from mlxctl.engine.engine import Engine
from mlxctl.models.loader import LoadedModel
from mlxctl.server.app import init_app
from mlxctl.server.residency import ModelPool
from mlxctl.server.runner import BackgroundServer
from mlxctl.server.settings import ServeSettings
from tests.engine.tiny import tiny_llama
from tests.server.test_residency import PROMPT, VOCAB, tiny_engine

WAIT = 120  # seconds a gate may stay shut before the test gives up


class Gates:
    """The slow model's two phases, each held until the test opens it."""

    def __init__(self):
        self.sizing, self.sized = threading.Event(), threading.Event()
        self.loading, self.loaded = threading.Event(), threading.Event()


@pytest.fixture
def daemon(engine):
    gates = Gates()
    tokenizer = engine.model.tokenizer

    def estimate() -> int:  # runs where the real one fetches the model and reads its headers
        gates.sizing.set()
        assert gates.sized.wait(WAIT)
        return 1 << 20

    def slow_model() -> LoadedModel:  # on the engine thread, where real weights are read
        gates.loading.set()
        assert gates.loaded.wait(WAIT)
        return LoadedModel(tiny_llama(seed=7, vocab=VOCAB), tokenizer, {"vocab_size": VOCAB}, 512, set(), "slow")

    pool = ModelPool(budget_bytes=1 << 30, default_keep_alive_s=None)
    pool.add("fast", "preset", tiny_engine(1, tokenizer))
    pool.add("slow", "preset", lambda: Engine(slow_model), estimate=estimate)
    server = BackgroundServer(init_app(engine, ServeSettings(model_name="smollm2-135m"), pool)).start()
    yield server.url, pool, gates
    gates.sized.set()
    gates.loaded.set()
    server.submit(pool.close()).result(30)
    server.stop()


def _post(url: str, model: str) -> httpx.Response:
    prompt = "Hi" if model == "smollm2-135m" else PROMPT
    return httpx.post(f"{url}/v1/completions", timeout=WAIT,
                      json={"model": model, "prompt": prompt, "max_tokens": 3, "temperature": 0})


def _others_complete(url: str, pool: ModelPool, phase: str) -> None:
    """Requests to the resident models, several at once, all answered while "slow" is still loading
    (its gate is shut: were they waiting for it, they would wait until their timeout)."""
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        results = list(ex.map(lambda m: _post(url, m), ["fast", "smollm2-135m", "fast", "smollm2-135m"]))
    assert [r.status_code for r in results] == [200] * 4, [r.text for r in results]
    models = {m["id"]: m["state"] for m in httpx.get(f"{url}/v1/models", timeout=WAIT).json()["data"]}
    assert models == {"smollm2-135m": "ready", "fast": "ready", "slow": "loading"}, phase
    assert pool.get("slow").state == "loading", phase


def test_requests_to_resident_models_go_on_while_another_loads(daemon):
    url, pool, gates = daemon
    assert _post(url, "fast").status_code == 200
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        slow = [ex.submit(_post, url, "slow")]
        assert gates.sizing.wait(WAIT)
        slow.append(ex.submit(_post, url, "slow"))  # a second request waits for the same load
        _others_complete(url, pool, "while it is sized")
        gates.sized.set()
        assert gates.loading.wait(WAIT)
        _others_complete(url, pool, "while its weights load")
        assert not any(f.done() for f in slow)
        gates.loaded.set()
        answers = [f.result(WAIT) for f in slow]
    assert [r.status_code for r in answers] == [200, 200]
    assert pool.get("slow").loads == 1 and pool.get("slow").state == "ready"
    assert all(r.leases == 0 for r in pool.models.values())


def test_a_model_loading_never_holds_the_admin_endpoints(daemon):
    url, _, gates = daemon
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        load = ex.submit(httpx.post, f"{url}/v1/models/slow/load", timeout=WAIT)
        assert gates.sizing.wait(WAIT)
        assert httpx.post(f"{url}/v1/models/fast/load", timeout=WAIT).json()["state"] == "ready"
        assert httpx.post(f"{url}/v1/models/fast/unload", timeout=WAIT).json()["state"] == "unloaded"
        assert httpx.get(f"{url}/v1/status", timeout=WAIT).status_code == 200
        gates.sized.set()
        gates.loaded.set()
        assert load.result(WAIT).json()["state"] == "ready"
