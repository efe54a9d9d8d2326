"""Sampling defaults for omitted fields, over a real server: request field > serve --default-* flag >
the model folder's generation_config.json > built-in. What the engine was asked for is read from
the SamplingParams each request reached ``engine.submit`` with."""

from __future__ import annotations

import json

import httpx
import pytest

from mlxctl.api.sampling_defaults import SamplingDefaults
from mlxctl.engine.engine import Engine
from mlxctl.models.loader import load_model
from mlxctl.server.app import init_app
from mlxctl.server.runner import BackgroundServer
from mlxctl.server.settings import ServeSettings

NAME = "smol-tuned"
GENERATION_CONFIG = {"temperature": 0.6, "top_p": 0.9, "top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1,
                     "do_sample": True, "bos_token_id": 1}
USER = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def tuned_engine(smollm2, tmp_path_factory):
    """SmolLM2 from a folder of links to its files, with a generation_config.json of its own."""
    folder = tmp_path_factory.mktemp("smol-tuned")
    for item in smollm2.path.iterdir():
        if item.name != "generation_config.json":
            (folder / item.name).symlink_to(item)
    (folder / "generation_config.json").write_text(json.dumps(GENERATION_CONFIG))
    engine = Engine(lambda: load_model(folder, name=NAME)).start()
    yield engine
    engine.shutdown()


@pytest.fixture
def submitted(tuned_engine, monkeypatch) -> list:
    """The SamplingParams of every request submitted to the engine during the test."""
    seen, submit = [], tuned_engine.submit

    def recording(prompt_tokens, params, **kwargs):
        seen.append(params)
        return submit(prompt_tokens, params, **kwargs)

    monkeypatch.setattr(tuned_engine, "submit", recording)
    return seen


@pytest.fixture
def serve(tuned_engine):
    servers = []

    def start(**defaults) -> str:
        settings = ServeSettings(model_name=NAME, sampling_defaults=SamplingDefaults(**defaults))
        servers.append(BackgroundServer(init_app(tuned_engine, settings)).start())
        return servers[-1].url

    yield start
    for server in servers:
        server.stop()


REQUESTS = {  # each endpoint's request with nothing but a limit of one token
    "/v1/chat/completions": {"messages": USER, "max_tokens": 1},
    "/v1/completions": {"prompt": "Hello", "max_tokens": 1},
    "/v1/responses": {"input": "hi", "max_output_tokens": 1},
    "/v1/messages": {"messages": USER, "max_tokens": 1},
}


def post(url: str, path: str, **fields) -> httpx.Response:
    body = {"model": NAME, **REQUESTS[path], **fields}
    r = httpx.post(f"{url}{path}", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r


@pytest.mark.parametrize("path", REQUESTS)
def test_omitted_fields_take_the_generation_config(serve, submitted, path):
    post(serve(), path)
    params = submitted[-1]
    assert (params.temperature, params.top_p, params.top_k) == (0.6, 0.9, 20)
    assert (params.min_p, params.repetition_penalty) == (0.05, 1.1)


@pytest.mark.parametrize("path", REQUESTS)
def test_a_flag_overrides_the_generation_config(serve, submitted, path):
    post(serve(temperature=0.3, top_p=0.5, top_k=3), path)
    params = submitted[-1]
    assert (params.temperature, params.top_p, params.top_k, params.min_p) == (0.3, 0.5, 3, 0.05)


@pytest.mark.parametrize("path", REQUESTS)
def test_a_request_field_overrides_flag_and_generation_config(serve, submitted, path):
    post(serve(temperature=0.3, top_p=0.5), path, temperature=0.8, top_p=0.7)
    params = submitted[-1]
    assert (params.temperature, params.top_p, params.top_k) == (0.8, 0.7, 20)


def test_a_request_temperature_of_zero_is_kept(serve, submitted):
    post(serve(temperature=0.3), "/v1/chat/completions", temperature=0)
    assert submitted[-1].temperature == 0


@pytest.mark.parametrize("path, limit", [("/v1/chat/completions", "max_tokens"),
                                         ("/v1/completions", "max_tokens"),
                                         ("/v1/responses", "max_output_tokens")])
def test_default_max_tokens_caps_only_an_omitted_limit(serve, submitted, path, limit):
    url = serve(max_tokens=3, temperature=0)
    body = {k: v for k, v in REQUESTS[path].items() if k != limit}
    r = httpx.post(f"{url}{path}", json={"model": NAME, **body}, timeout=120)
    assert r.status_code == 200, r.text
    capped = submitted[-1]
    assert (capped.max_tokens, capped.max_tokens_field) == (3, None)
    usage = r.json()["usage"]
    assert usage.get("completion_tokens", usage.get("output_tokens")) <= 3
    post(url, path, **{limit: 5})
    assert (submitted[-1].max_tokens, submitted[-1].max_tokens_field) == (5, limit)


def test_without_the_flag_an_omitted_limit_runs_to_the_context(serve, submitted):
    """Today's behaviour is kept: no cap (the engine gives the request what the context leaves)."""
    url = serve()
    r = httpx.post(f"{url}/v1/chat/completions", timeout=120,
                   json={"model": NAME, "messages": USER, "temperature": 0, "stop": ["\n", "."], "max_tokens": None})
    assert r.status_code == 200, r.text
    assert submitted[-1].max_tokens is None


def test_models_lists_the_effective_defaults(serve, tuned_engine):
    url = serve(temperature=0.3, max_tokens=10**9)
    entry = httpx.get(f"{url}/v1/models/{NAME}", timeout=30).json()
    assert entry["sampling_defaults"] == {"temperature": 0.3, "top_p": 0.9, "top_k": 20, "min_p": 0.05,
                                          "repetition_penalty": 1.1,
                                          "max_tokens": tuned_engine.model.context_length}


def test_models_lists_the_built_ins_without_a_generation_config(engine):
    server = BackgroundServer(init_app(engine, ServeSettings(model_name="plain"))).start()
    try:
        entry = httpx.get(f"{server.url}/v1/models/plain", timeout=30).json()
    finally:
        server.stop()
    assert entry["sampling_defaults"] == {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0,
                                          "repetition_penalty": 1.0, "max_tokens": None}
