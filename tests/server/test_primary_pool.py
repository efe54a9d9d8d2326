"""serve --no-pin-primary: the primary model joins the resident pool. Idle past its keep-alive,
or in the way of another model under --max-loaded-gb, its engine sleeps (weights given back);
the next request that names it loads it again."""

from __future__ import annotations

import httpx
import pytest
from mlx.utils import tree_flatten

from mlxctl.server.app import init_app
from mlxctl.server.residency import ModelPool
from mlxctl.server.runner import BackgroundServer
from mlxctl.server.settings import ServeSettings
from tests.cli.helpers import run_cli
from tests.engine.tiny import tiny_llama
from tests.server.test_residency import VOCAB, complete, states, tiny_engine


@pytest.fixture
def daemon(engine):
    """(url, pool, server, primary): a tiny primary model, unpinned, beside a tiny pool model;
    the budget holds one of them."""
    one_model = sum(v.nbytes for _, v in tree_flatten(tiny_llama(vocab=VOCAB).parameters()))
    tokenizer = engine.model.tokenizer
    primary = tiny_engine(5, tokenizer)().start()
    pool = ModelPool(budget_bytes=one_model, default_keep_alive_s=None)
    pool.add("tiny-a", "preset", tiny_engine(1, tokenizer))
    app = init_app(primary, ServeSettings(model_name="tiny-p", pin_primary=False), pool)
    pool.started("tiny-p")  # what the server's start does once the model is loaded
    server = BackgroundServer(app).start()
    yield server.url, pool, server, primary
    server.submit(pool.close()).result(30)
    server.stop()
    primary.shutdown()


def entry(url: str, name: str) -> dict:
    return next(m for m in httpx.get(f"{url}/v1/models").json()["data"] if m["id"] == name)


def test_the_primary_unloads_when_idle_and_the_next_request_loads_it_again(daemon):
    url, pool, server, primary = daemon
    assert entry(url, "tiny-p")["state"] == "ready" and entry(url, "tiny-p")["pinned"] is False
    assert [m["id"] for m in httpx.get(f"{url}/v1/models").json()["data"]].count("tiny-p") == 1
    first = complete(url, "tiny-p", keep_alive=0)
    assert server.submit(pool.reap()).result(30) == ["tiny-p"]
    assert primary.asleep and primary.model.model is None  # its weights are given back
    assert entry(url, "tiny-p")["state"] == "unloaded" and entry(url, "tiny-p")["context_length"] is None
    again = complete(url, "tiny-p")
    assert again["choices"][0]["text"] == first["choices"][0]["text"]
    described = entry(url, "tiny-p")
    assert described["state"] == "ready" and described["loads"] == 2 and not primary.asleep
    assert described["context_length"] == 512


def test_the_admin_endpoints_unload_and_load_the_primary(daemon):
    url, _, _, primary = daemon
    r = httpx.post(f"{url}/v1/models/tiny-p/unload")
    assert r.status_code == 200 and r.json()["state"] == "unloaded" and primary.asleep
    r = httpx.post(f"{url}/v1/models/tiny-p/load", timeout=60)
    assert r.status_code == 200 and r.json()["state"] == "ready" and not primary.asleep


def test_the_budget_evicts_the_idle_primary_for_another_model_and_back(daemon):
    url, _, _, primary = daemon
    complete(url, "tiny-a")  # only one fits: the idle primary makes room
    assert primary.asleep and states(url)["tiny-p"] == "unloaded" and states(url)["tiny-a"] == "ready"
    complete(url, "tiny-p")
    assert not primary.asleep and states(url)["tiny-a"] == "unloaded"


def test_a_pinned_primary_cannot_be_unloaded_and_says_how_to_allow_it(serve):
    url = serve()
    r = httpx.post(f"{url}/v1/models/smollm2-135m/unload")
    assert r.status_code == 404 and "serve --no-pin-primary" in r.json()["error"]["message"]


def test_no_pin_primary_is_refused_with_tensor_parallel(model_home):
    r = run_cli("serve", "--no-pin-primary", "--tensor-parallel", "2",
                env={"MLXCTL_HOME": str(model_home), "HF_HUB_OFFLINE": "1"})
    assert r.returncode == 4 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.splitlines()[0].startswith("mlxctl: error: --no-pin-primary does not work with --tensor-parallel")
