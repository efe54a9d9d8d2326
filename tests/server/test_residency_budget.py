"""--max-loaded-gb is kept before a load: idle models are unloaded to make room first (from the
new model's size as `model inspect` estimates it), and a model that cannot fit is refused with a
protocol error that says why. Real model folders, real loads, a real server on loopback."""

from __future__ import annotations

import httpx
import pytest

from mlxctl.cli.serve_models import EngineDefaults, ModelSpec, build_pool
from mlxctl.engine.engine import EngineConfig
from mlxctl.models.inspect import loaded_weights_bytes
from mlxctl.server.app import init_app
from mlxctl.server.residency import weights_bytes
from mlxctl.server.runner import BackgroundServer
from mlxctl.server.settings import ServeSettings
from tests.server.test_residency import PROMPT


@pytest.fixture
def daemon(engine, tiny_folder):
    """(url, pool, server, seen, one): models "a" and "b" (the tiny folder, float32 as on CPU),
    a budget of the pinned primary's weights and one and a half of theirs; ``seen[name]`` is the
    pool as it stood when name's engine was made, i.e. after making room and before its
    weights were read."""
    one = loaded_weights_bytes(tiny_folder, "auto")
    specs = [ModelSpec("a", str(tiny_folder)), ModelSpec("b", str(tiny_folder))]
    budget = weights_bytes(engine) + one * 3 // 2  # the primary counts too
    pool = build_pool(specs, budget, None, EngineDefaults("auto", "auto", None, EngineConfig()))
    seen: dict[str, dict] = {}
    for resident in pool.models.values():
        resident.make_engine = _recording(resident.name, resident.make_engine, pool, seen)
    server = BackgroundServer(init_app(engine, ServeSettings(model_name="smollm2-135m"), pool)).start()
    yield server.url, pool, server, seen, one
    server.submit(pool.close()).result(30)
    server.stop()


def _recording(name, make_engine, pool, seen):
    def make():
        seen[name] = {"states": {r.name: r.state for r in pool.models.values()}, "loaded": pool.loaded_bytes}
        return make_engine()
    return make


def _complete(url: str, model: str, path: str = "/v1/completions") -> httpx.Response:
    body = {"model": model, "prompt": PROMPT, "max_tokens": 3, "temperature": 0}
    if path == "/v1/messages":
        body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
    return httpx.post(f"{url}{path}", json=body, timeout=120)


def test_the_idle_model_is_unloaded_before_the_new_one_loads(daemon):
    url, pool, _, seen, one = daemon
    assert _complete(url, "a").status_code == 200
    assert pool.get("a").nbytes == pool.get("a").estimated_bytes == one  # the estimate is exact here
    assert _complete(url, "b").status_code == 200
    # when b's weights were about to be read, a was already gone: the peak stayed in the budget
    assert seen["b"] == {"states": {"a": "unloaded", "b": "loading"}, "loaded": 0}
    assert pool.get("a").state == "unloaded" and pool.get("b").state == "ready"
    assert pool.loaded_bytes + pool.outside() <= pool.budget_bytes
    assert _complete(url, "a").status_code == 200 and seen["a"]["states"]["b"] == "unloaded"


def test_a_pinned_model_that_holds_the_room_is_a_507(daemon):
    url, pool, _, _, _ = daemon
    assert _complete(url, "b").status_code == 200
    pool.get("b").pinned = True
    for path in ("/v1/completions", "/v1/messages"):
        r = _complete(url, "a", path)
        assert r.status_code == 507, r.text
        message = r.json()["error"]["message"]
        assert "needs about" in message and "'b'" in message and "(pinned)" in message and "unpin one" in message
    assert r.json()["type"] == "error"  # /v1/messages: Anthropic's shape
    assert pool.get("a").state == "unloaded" and "pinned" in pool.get("a").error
    assert pool.get("b").state == "ready"


def test_a_model_in_use_that_holds_the_room_is_a_503_to_retry(daemon):
    url, pool, server, _, _ = daemon
    assert _complete(url, "b").status_code == 200
    leased = server.submit(pool.lease("b")).result(30)  # a request still using b
    r = _complete(url, "a")
    assert r.status_code == 503 and r.headers["Retry-After"] == "5"
    assert "'b'" in r.json()["error"]["message"] and "(in use)" in r.json()["error"]["message"]
    assert r.json()["error"]["code"] == "model_budget_busy"
    server.submit(_release(pool, leased)).result(30)
    assert _complete(url, "a").status_code == 200  # b was idle again, so it made room
    assert pool.get("b").state == "unloaded"


async def _release(pool, resident):
    pool.release(resident)


def test_a_model_larger_than_the_whole_budget_is_a_507(daemon):
    url, pool, _, seen, one = daemon
    pool.budget_bytes = one // 2
    r = _complete(url, "a")
    assert r.status_code == 507 and r.json()["error"]["code"] == "model_too_large"
    assert "more than the whole --max-loaded-gb budget" in r.json()["error"]["message"]
    assert "a" not in seen  # refused before its engine was made
    listed = {m["id"]: m for m in httpx.get(f"{url}/v1/models").json()["data"]}["a"]
    assert listed["state"] == "unloaded" and listed["estimated_bytes"] == one
    pool.budget_bytes = 0  # no limit: it loads
    assert _complete(url, "a").status_code == 200


def test_the_pinned_primary_counts_in_the_budget(daemon):
    url, pool, _, seen, one = daemon
    primary = pool.outside()
    assert primary > 0
    pool.budget_bytes = primary + one // 2  # a fits the budget alone, not beside the primary
    r = _complete(url, "a")
    assert r.status_code == 507 and r.json()["error"]["code"] == "model_budget_full"
    assert "the pinned primary model holds" in r.json()["error"]["message"] and "a" not in seen


def test_admin_load_keeps_the_budget_too(daemon):
    url, pool, _, seen, _ = daemon
    assert httpx.post(f"{url}/v1/models/a/load", timeout=120).json()["state"] == "ready"
    assert httpx.post(f"{url}/v1/models/b/load", timeout=120).json()["state"] == "ready"
    assert seen["b"]["states"]["a"] == "unloaded"
    pool.get("b").pinned = True
    r = httpx.post(f"{url}/v1/models/a/load", timeout=120)
    assert r.status_code == 507 and "(pinned)" in r.json()["error"]["message"]
