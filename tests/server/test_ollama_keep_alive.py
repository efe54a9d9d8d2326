"""Ollama's keep_alive on /api/chat and /api/generate, onto the resident pool (as on the OpenAI
endpoints), and the empty request that loads or unloads a model."""

from __future__ import annotations

import ollama
import pytest

from mlxctl.server.app import init_app
from mlxctl.server.residency import ModelPool
from mlxctl.server.runner import BackgroundServer
from mlxctl.server.settings import ServeSettings
from tests.server.test_residency import tiny_engine


@pytest.fixture
def daemon(engine):
    """(client, pool, server): SmolLM2 as primary, one tiny model in the pool, kept forever by default."""
    pool = ModelPool(default_keep_alive_s=None)
    pool.add("tiny-a", "preset", tiny_engine(1, engine.model.tokenizer))
    server = BackgroundServer(init_app(engine, ServeSettings(model_name="smollm2-135m"), pool)).start()
    yield ollama.Client(host=server.url), pool, server
    server.submit(pool.close()).result(30)
    server.stop()


def test_chat_takes_keep_alive(daemon):
    client, pool, _ = daemon
    out = client.chat(model="tiny-a", messages=[{"role": "user", "content": "Hi"}], keep_alive="2h",
                      options={"num_predict": 2})
    assert out.done and pool.get("tiny-a").keep_alive_s == 7200


def test_empty_generate_with_keep_alive_zero_unloads_a_pool_model(daemon):
    client, pool, server = daemon
    assert client.generate(model="tiny-a", keep_alive=0).done_reason == "unload"
    assert server.submit(pool.reap()).result(30) == ["tiny-a"]


def test_the_primary_model_stays_loaded(daemon):
    client, _, _ = daemon
    assert client.generate(model="smollm2-135m", keep_alive=0).done_reason == "load"
