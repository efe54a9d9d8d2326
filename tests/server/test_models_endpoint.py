"""GET /v1/models and /v1/models/{id} with the official SDKs: OpenAI's model objects, Anthropic's
ModelInfo when the client is Anthropic's, and what each model is (context, capabilities,
quantization)."""

from __future__ import annotations

from datetime import datetime

import anthropic
import httpx
import openai
import pytest

from mlxctl.server.app import init_app
from mlxctl.server.model_facts import quantization
from mlxctl.server.residency import ModelPool
from mlxctl.server.runner import BackgroundServer
from mlxctl.server.settings import ServeSettings
from tests.server.infra import anthropic_client, openai_client
from tests.server.test_residency import tiny_engine


def test_openai_sdk_retrieves_the_served_model_with_its_facts(base_url, engine):
    found = openai_client(base_url).models.retrieve("smollm2-135m")
    assert found.id == "smollm2-135m" and found.object == "model" and found.owned_by == "mlxctl"
    extra = found.model_dump()
    assert extra["state"] == "ready" and extra["pinned"] is True
    assert extra["context_length"] == engine.model.context_length
    assert extra["capabilities"][:2] == ["chat", "tools"]
    assert set(extra["quantization"]) >= {"quantized", "bits", "group_size", "dtype"}


def test_the_list_carries_the_same_facts(base_url):
    listed = openai_client(base_url).models.list().data
    assert [m.id for m in listed] == ["smollm2-135m"]
    assert listed[0].model_dump()["context_length"] > 0


def test_openai_sdk_gets_a_404_for_an_unknown_model(base_url):
    with pytest.raises(openai.NotFoundError) as caught:
        openai_client(base_url).models.retrieve("gpt-4o")
    error = caught.value.body
    assert error["code"] == "model_not_found" and "'gpt-4o' not found" in error["message"]
    assert "'smollm2-135m'" in error["message"]


def test_anthropic_sdk_lists_and_retrieves_model_info(base_url, engine):
    client = anthropic_client(base_url)
    page = client.models.list()
    assert [m.id for m in page.data] == ["smollm2-135m"] and page.has_more is False
    info = client.models.retrieve("smollm2-135m")
    assert info.type == "model" and info.display_name == "smollm2-135m"
    assert isinstance(info.created_at, datetime) and info.created_at.tzinfo is not None
    assert info.max_input_tokens == engine.model.context_length - 1
    assert info.model_dump()["state"] == "ready"


def test_anthropic_sdk_gets_an_anthropic_shaped_404(base_url):
    with pytest.raises(anthropic.NotFoundError) as caught:
        anthropic_client(base_url).models.retrieve("claude-sonnet-4-5")
    body = caught.value.body
    assert body["type"] == "error" and body["error"]["type"] == "not_found_error"
    assert "'claude-sonnet-4-5' not found" in body["error"]["message"]


def test_anthropic_pages_follow_limit_and_after_id(serve):
    url = serve(aliases=("a", "b"))
    headers = {"anthropic-version": "2023-06-01"}
    first = httpx.get(f"{url}/v1/models", params={"limit": 2}, headers=headers).json()
    assert [m["id"] for m in first["data"]] == ["smollm2-135m", "a"] and first["has_more"] is True
    rest = httpx.get(f"{url}/v1/models", params={"limit": 2, "after_id": first["last_id"]}, headers=headers).json()
    assert [m["id"] for m in rest["data"]] == ["b"] and rest["has_more"] is False
    assert [m.id for m in anthropic_client(url).models.list(limit=1)] == ["smollm2-135m", "a", "b"]  # auto-paging


def test_a_bad_anthropic_limit_is_a_400_naming_it(base_url):
    r = httpx.get(f"{base_url}/v1/models", params={"limit": "0"}, headers={"anthropic-version": "2023-06-01"})
    assert r.status_code == 400 and r.json()["type"] == "error"
    assert "limit must be an integer from 1 to 1000" in r.json()["error"]["message"]


def test_capabilities_follow_the_parser_flags(serve):
    quiet = openai_client(serve(tool_call_parser="none", reasoning_parser="think")).models.retrieve("smollm2-135m")
    assert quiet.model_dump()["capabilities"] == ["chat", "reasoning"]


@pytest.fixture
def pooled(engine):
    """SmolLM2 as primary, a tiny model (org/tiny: a name with a slash) in the pool, not loaded."""
    pool = ModelPool(default_keep_alive_s=None)
    pool.add("org/tiny", "preset", tiny_engine(1, engine.model.tokenizer))
    server = BackgroundServer(init_app(engine, ServeSettings(model_name="smollm2-135m"), pool)).start()
    yield server, pool
    server.submit(pool.close()).result(30)
    server.stop()


def test_a_pool_model_is_retrieved_by_a_name_with_a_slash_and_known_once_loaded(pooled):
    server, pool = pooled
    client = openai_client(server.url)
    before = client.models.retrieve("org/tiny").model_dump()
    assert before["state"] == "unloaded" and before["context_length"] is None and before["capabilities"] is None
    server.submit(pool.load("org/tiny")).result(60)
    after = client.models.retrieve("org/tiny").model_dump()
    assert after["state"] == "ready" and after["context_length"] == 512 and after["capabilities"][0] == "chat"
    assert after["quantization"]["quantized"] is False


def test_quantization_reads_the_layers_as_loaded():
    import mlx.core as mx
    import mlx.nn as nn

    plain = nn.Sequential(nn.Embedding(64, 64), nn.Linear(64, 64))
    plain.set_dtype(mx.bfloat16)
    assert quantization(plain) == {"quantized": False, "bits": None, "group_size": None, "mode": None,
                                   "mixed": False, "dtype": "bfloat16"}
    nn.quantize(plain, group_size=32, bits=4)
    assert quantization(plain) == {"quantized": True, "bits": 4, "group_size": 32, "mode": "affine",
                                   "mixed": False, "dtype": "bfloat16"}
