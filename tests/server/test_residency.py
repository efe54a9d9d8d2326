"""Several models in one daemon: lazy loads, a budget that evicts, leases, keep-alive, admin."""

from __future__ import annotations

import concurrent.futures
import dataclasses

import httpx
import pytest

from mlxctl.engine.engine import Engine
from mlxctl.server.app import init_app
from mlxctl.server.residency import ModelPool, parse_keep_alive
from mlxctl.server.runner import BackgroundServer
from mlxctl.server.settings import ServeSettings
from mlxctl.models.loader import LoadedModel
from tests.engine.tiny import tiny_llama

PROMPT = [3, 1, 4, 1, 5, 9, 2, 6]
VOCAB = 49152  # SmolLM2's tokenizer, so the server's text paths work on the tiny models


def tiny_engine(seed: int, tokenizer):
    def make() -> Engine:
        model = tiny_llama(seed=seed, vocab=VOCAB)
        config = {"vocab_size": VOCAB}
        return Engine(lambda: LoadedModel(model, tokenizer, config, 512, set(), f"tiny-{seed}"))
    return make


@pytest.fixture
def daemon(engine):
    """(url, pool, server): the real SmolLM2 as primary, two tiny models in a pool that holds one."""
    from mlx.utils import tree_flatten

    one_model = sum(v.nbytes for _, v in tree_flatten(tiny_llama(vocab=VOCAB).parameters()))
    pool = ModelPool(budget_bytes=one_model, default_keep_alive_s=None)
    tokenizer = engine.model.tokenizer
    pool.add("tiny-a", "preset", tiny_engine(1, tokenizer))
    pool.add("tiny-b", "preset", tiny_engine(2, tokenizer))
    settings = ServeSettings(model_name="smollm2-135m")
    server = BackgroundServer(init_app(engine, settings, pool)).start()
    yield server.url, pool, server
    server.submit(pool.close()).result(30)
    server.stop()


def complete(url: str, model: str, n: int = 4, **extra) -> dict:
    r = httpx.post(f"{url}/v1/completions", json={"model": model, "prompt": PROMPT, "max_tokens": n,
                                                  "temperature": 0, **extra}, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def states(url: str) -> dict[str, str]:
    return {m["id"]: m["state"] for m in httpx.get(f"{url}/v1/models").json()["data"]}


def test_models_load_on_first_use_and_the_budget_evicts_the_idle_one(daemon):
    url, pool, _ = daemon
    assert states(url) == {"smollm2-135m": "ready", "tiny-a": "unloaded", "tiny-b": "unloaded"}
    first_a = complete(url, "tiny-a")["choices"][0]["text"]
    assert states(url)["tiny-a"] == "ready"
    complete(url, "tiny-b")
    assert states(url) == {"smollm2-135m": "ready", "tiny-a": "unloaded", "tiny-b": "ready"}
    assert complete(url, "tiny-a")["choices"][0]["text"] == first_a  # reloaded, same weights
    assert states(url)["tiny-b"] == "unloaded" and pool.get("tiny-a").loads == 2


def test_requests_to_both_keep_succeeding_while_they_evict_each_other(daemon):
    url, pool, _ = daemon
    names = ["tiny-a", "tiny-b", "smollm2-135m"] * 4
    with concurrent.futures.ThreadPoolExecutor(6) as ex:
        results = list(ex.map(lambda m: complete(url, m, n=3, **({"prompt": "Hi"} if m.startswith("smol") else {})),
                              names))
    assert all(r["choices"][0]["finish_reason"] == "length" for r in results)
    assert sum(r.loads for r in pool.models.values()) >= 2
    assert all(r.leases == 0 for r in pool.models.values())


def test_a_model_in_use_is_never_evicted(daemon):
    url, pool, _ = daemon
    with httpx.stream("POST", f"{url}/v1/completions", timeout=120, json={
            "model": "tiny-a", "prompt": PROMPT, "max_tokens": 150, "temperature": 0, "stream": True,
            "ignore_eos": True}) as r:
        lines = r.iter_lines()
        next(line for line in lines if line.startswith("data: "))
        complete(url, "tiny-b")  # over budget, but tiny-a is leased
        assert states(url)["tiny-a"] == "ready" and pool.get("tiny-a").leases == 1
        rest = [line for line in lines if line.startswith("data: ")]
    assert rest[-1] == "data: [DONE]"
    assert pool.get("tiny-a").leases == 0


def test_keep_alive_zero_unloads_after_the_request(daemon):
    url, pool, server = daemon
    complete(url, "tiny-a", keep_alive=0)
    assert server.submit(pool.reap()).result(30) == ["tiny-a"]
    assert states(url)["tiny-a"] == "unloaded"
    bad = httpx.post(f"{url}/v1/completions", json={"model": "tiny-a", "prompt": PROMPT, "keep_alive": "soon"})
    assert bad.status_code == 400 and "keep_alive" in bad.json()["error"]["message"]


def test_admin_load_and_unload_and_unknown_names(daemon):
    url, _, _ = daemon
    assert httpx.post(f"{url}/v1/models/tiny-b/load", timeout=60).json()["state"] == "ready"
    assert httpx.post(f"{url}/v1/models/tiny-b/unload").json()["state"] == "unloaded"
    assert httpx.post(f"{url}/v1/models/smollm2-135m/unload").status_code == 404
    missing = httpx.post(f"{url}/v1/completions", json={"model": "llama-70b", "prompt": "x"})
    assert missing.status_code == 404 and "tiny-a" in missing.json()["error"]["message"]
    status = httpx.get(f"{url}/v1/status").json()["models"]
    assert {m["id"] for m in status} == {"tiny-a", "tiny-b"}


@pytest.mark.parametrize("value, seconds", [(300, 300.0), ("5m", 300.0), ("1h", 3600.0), ("30s", 30.0),
                                            (-1, None), ("-1", None), (0, 0.0)])
def test_keep_alive_durations(value, seconds):
    assert parse_keep_alive(value) == seconds


def test_serve_splits_named_models():
    from mlxctl.cli.serve import split_models

    first, extras = split_models(["smollm2-135m", "fast=./models/tiny", "org/repo"])
    assert first == (None, "smollm2-135m")
    assert extras == [("fast", "./models/tiny"), ("org/repo", "org/repo")]
    assert dataclasses.is_dataclass(ServeSettings)


def test_a_pinned_model_outlives_its_keep_alive_and_the_budget(engine):
    import asyncio

    pool = ModelPool(budget_bytes=1, default_keep_alive_s=0)
    tokenizer = engine.model.tokenizer
    pool.add("pinned", "preset", tiny_engine(3, tokenizer), pinned=True)
    pool.add("other", "preset", tiny_engine(4, tokenizer))

    async def scenario():
        await pool.load("pinned")
        await pool.load("other")  # over budget: only "other" itself is loaded and unpinned
        gone = await pool.reap()
        return gone, {r.name: r.state for r in pool.models.values()}

    try:
        gone, states_now = asyncio.run(scenario())
    finally:
        asyncio.run(pool.close())
        for r in pool.models.values():
            if r.engine is not None:
                r.engine.shutdown()
    assert gone == ["other"] and states_now == {"pinned": "ready", "other": "unloaded"}
