"""What a request may ask of the resident pool: Ollama's ``keep_alive`` on every chat endpoint,
and a model that is not configured (404, nothing fetched, unless `serve --allow-unconfigured-models`)."""

from __future__ import annotations

import shutil

import anthropic
import httpx
import openai
import pytest

from mlxctl.cli.serve_models import EngineDefaults, build_pool
from mlxctl.engine.engine import EngineConfig
from mlxctl.server.app import init_app
from mlxctl.server.residency import ModelPool
from mlxctl.server.runner import BackgroundServer
from mlxctl.server.settings import ServeSettings
from tests.server.test_residency import PROMPT, tiny_engine

HI = [{"role": "user", "content": "Hi"}]


@pytest.fixture
def daemon(engine):
    """(url, pool, server): SmolLM2 as primary, one tiny model in the pool, kept forever by default."""
    pool = ModelPool(default_keep_alive_s=None)
    pool.add("tiny-a", "preset", tiny_engine(1, engine.model.tokenizer))
    server = BackgroundServer(init_app(engine, ServeSettings(model_name="smollm2-135m"), pool)).start()
    yield server.url, pool, server
    server.submit(pool.close()).result(30)
    server.stop()


# --- keep_alive on /v1/messages and /v1/responses -----------------------------------------


def test_messages_take_keep_alive(daemon):
    url, pool, server = daemon
    client = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0)
    msg = client.messages.create(model="tiny-a", messages=HI, max_tokens=3, extra_body={"keep_alive": "2h"})
    assert msg.usage.output_tokens > 0 and pool.get("tiny-a").keep_alive_s == 7200
    r = httpx.post(f"{url}/v1/messages", timeout=60, json={"model": "tiny-a", "messages": HI, "max_tokens": 3,
                                                           "keep_alive": 0})
    assert r.status_code == 200, r.text
    assert server.submit(pool.reap()).result(30) == ["tiny-a"]  # 0: unloaded once idle


def test_responses_take_keep_alive(daemon):
    url, pool, server = daemon
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    out = client.responses.create(model="tiny-a", input="Hi", max_output_tokens=3, extra_body={"keep_alive": "30s"})
    assert out.status in ("completed", "incomplete") and pool.get("tiny-a").keep_alive_s == 30
    r = httpx.post(f"{url}/v1/responses", timeout=60, json={"model": "tiny-a", "input": "Hi", "max_output_tokens": 3,
                                                            "keep_alive": -1, "stream": True})
    assert r.status_code == 200 and ("response.completed" in r.text or "response.incomplete" in r.text)
    assert pool.get("tiny-a").keep_alive_s is None  # -1: never unloaded when idle
    assert server.submit(pool.reap()).result(30) == []


@pytest.mark.parametrize("path, body", [
    ("/v1/messages", {"messages": HI, "max_tokens": 3}),
    ("/v1/responses", {"input": "Hi", "max_output_tokens": 3}),
    ("/v1/chat/completions", {"messages": HI, "max_tokens": 3}),
])
@pytest.mark.parametrize("model", ["tiny-a", "smollm2-135m"])
def test_a_bad_keep_alive_is_a_400_in_the_protocol_shape(daemon, path, body, model):
    url, pool, _ = daemon
    for bad in ("soon", "5 parsecs", [5], True):
        r = httpx.post(f"{url}{path}", timeout=60, json={"model": model, **body, "keep_alive": bad})
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert "keep_alive" in error["message"]
        if path == "/v1/messages":
            assert r.json()["type"] == "error" and error["type"] == "invalid_request_error"
        else:
            assert error["param"].startswith("keep_alive") and error["type"] == "invalid_request_error"
    assert pool.get("tiny-a").state == "unloaded"  # refused before anything loaded


# --- models a request names that are not configured -------------------------------------


def _tiny_repo(hf_home, folder):
    """``folder`` laid out in the Hugging Face cache as the snapshot of org/tiny."""
    from tests.models.test_inspect import fake_hf_snapshot

    files = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and p.name != "manifest.json"}
    return fake_hf_snapshot(hf_home, "org/tiny", files)


@pytest.fixture
def open_daemon(engine, model_home, tiny_folder, tmp_path, monkeypatch):
    """A server that lets requests name unconfigured models; SmolLM2 is the primary under the
    name "chat", so its catalog name is not configured. Offline, the store is the test cache."""
    monkeypatch.setenv("MLXCTL_HOME", str(model_home))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    _tiny_repo(tmp_path / "hf", tiny_folder)
    defaults = EngineDefaults("native", "auto", None, EngineConfig())
    pool = build_pool([], 0, None, defaults, allow_unconfigured=True)
    server = BackgroundServer(init_app(engine, ServeSettings(model_name="chat"), pool)).start()
    yield server.url, pool
    server.submit(pool.close()).result(30)
    server.stop()


def _complete(url: str, model: str) -> httpx.Response:
    return httpx.post(f"{url}/v1/completions", timeout=180,
                      json={"model": model, "prompt": PROMPT, "max_tokens": 3, "temperature": 0})


def _listed(url: str) -> dict[str, dict]:
    return {m["id"]: m for m in httpx.get(f"{url}/v1/models").json()["data"]}


def test_unconfigured_models_are_a_404_and_nothing_is_fetched(engine, tmp_path, monkeypatch):
    home = tmp_path / "empty-store"
    monkeypatch.setenv("MLXCTL_HOME", str(home))
    pool = build_pool([], 0, None, EngineDefaults("native", "auto", None, EngineConfig()))
    server = BackgroundServer(init_app(engine, ServeSettings(model_name="chat"), pool)).start()
    try:
        for name in ("smollm2-135m", "org/tiny", "HuggingFaceTB/SmolLM2-135M-Instruct"):
            r = _complete(server.url, name)
            assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
            assert "this server serves 'chat'" in r.json()["error"]["message"]
        assert pool.models == {} and not home.exists()  # nothing added, nothing fetched
    finally:
        server.stop()


def test_allowed_a_request_loads_a_hub_repo_and_a_catalog_model(open_daemon, model_home):
    url, pool = open_daemon
    assert set(_listed(url)) == {"chat"}
    r = _complete(url, "org/tiny")  # from the (offline) Hugging Face cache
    assert r.status_code == 200, r.text
    assert r.json()["model"] == "org/tiny" and r.json()["usage"]["completion_tokens"] == 3
    listed = _listed(url)["org/tiny"]
    assert (listed["state"], listed["configured"], listed["loads"]) == ("ready", False, 1)
    assert listed["estimated_bytes"] == listed["weights_bytes"] > 0
    r = _complete(url, "smollm2-135m")  # a catalog name, already in the store: a second SmolLM2
    assert r.status_code == 200, r.text
    assert _listed(url)["smollm2-135m"]["state"] == "ready"
    assert _complete(url, "org/tiny").status_code == 200 and pool.get("org/tiny").loads == 1


def test_allowed_never_means_a_local_path_or_another_kind(open_daemon, tiny_folder, tmp_path):
    url, pool = open_daemon
    shutil.copytree(tiny_folder, tmp_path / "evil" / "model")  # ./evil/model exists, relative to the cwd
    refused = {
        str(tiny_folder): "never a path",
        "./evil/model": "never a path",
        "../evil/model": "never a path",
        "~/model": "never a path",
        "whisper-tiny-en": "stt model, not a chat model",
        "minilm-l6": "embed model, not a chat model",
    }
    for name, why in refused.items():
        r = _complete(url, name)
        assert r.status_code == 404 and why in r.json()["error"]["message"], (name, r.text)
    # a repo id that names a local folder too: the Hub (offline here) is asked, never the folder
    r = _complete(url, "evil/model")
    assert r.status_code == 503 and "cannot download evil/model" in r.json()["error"]["message"]
    assert pool.models == {}  # a load that failed leaves nothing behind
    assert set(_listed(url)) == {"chat"}
