"""Per-model sampling defaults in ``serve --models-config``: request field > the model's entry >
serve --default-* flag > generation_config.json > built-in. Two configured tiny models behind a
real server, asked through the official openai SDK; what the engine was asked for is read from
the SamplingParams each request reached ``Engine.submit`` with."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from mlxctl.api.sampling_defaults import SamplingDefaults
from mlxctl.cli.serve_models import EngineDefaults, build_pool, load_models_config
from mlxctl.engine.engine import Engine, EngineConfig
from mlxctl.errors import BadInputError
from mlxctl.server.app import init_app
from mlxctl.server.runner import BackgroundServer
from mlxctl.server.settings import ServeSettings
from tests.cli.helpers import run_cli

CONFIG = {"models": [
    {"name": "warm", "ref": "./tiny", "temperature": 0.7, "top_p": 0.8, "top_k": 40, "min_p": 0.1, "max_tokens": 2},
    {"name": "cold", "ref": "./tiny", "temperature": 0, "max_tokens": 3},
]}


def write(folder, config: dict, name: str = "models.json"):
    path = folder / name
    path.write_text(json.dumps(config))
    return path


@pytest.fixture
def submitted(monkeypatch) -> list:
    """(engine, SamplingParams) of every request any engine got during the test, in order."""
    seen, submit = [], Engine.submit

    def recording(self, prompt_tokens, params, **kwargs):
        seen.append((self, params))
        return submit(self, prompt_tokens, params, **kwargs)

    monkeypatch.setattr(Engine, "submit", recording)
    return seen


@pytest.fixture
def pool_server(engine, tiny_folder, tmp_path):
    """(url, pool): SmolLM2 as primary, "warm" and "cold" from a models config, serve flags
    --default-temperature 0.3 --default-top-p 0.5."""
    (tmp_path / "tiny").symlink_to(tiny_folder)
    specs = load_models_config(write(tmp_path, CONFIG))
    pool = build_pool(specs, 0, None, EngineDefaults("auto", "auto", None, EngineConfig()))
    flags = SamplingDefaults(temperature=0.3, top_p=0.5)
    server = BackgroundServer(init_app(engine, ServeSettings(model_name="smollm2-135m", sampling_defaults=flags),
                                       pool)).start()
    yield server.url, pool
    server.submit(pool.close()).result(60)
    server.stop()


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


def test_each_models_entry_reaches_the_sampler(pool_server, submitted):
    url, _ = pool_server
    oai = client(url)
    for name in ("warm", "cold", "smollm2-135m"):
        oai.completions.create(model=name, prompt="Hello", stop=["\n"])
    warm, cold, primary = (params for _, params in submitted)
    assert (warm.temperature, warm.top_p, warm.top_k, warm.min_p, warm.max_tokens) == (0.7, 0.8, 40, 0.1, 2)
    assert (cold.temperature, cold.top_p, cold.top_k, cold.max_tokens) == (0.0, 0.5, 0, 3)  # top_p: the flag
    assert (primary.temperature, primary.top_p) == (0.3, 0.5)  # no entry: the flags


def test_a_request_field_overrides_the_entry(pool_server, submitted):
    url, _ = pool_server
    client(url).completions.create(model="warm", prompt="Hello", temperature=1.5, top_p=0.6, max_tokens=1)
    params = submitted[-1][1]
    assert (params.temperature, params.top_p, params.top_k, params.max_tokens) == (1.5, 0.6, 40, 1)


def test_models_lists_each_models_effective_defaults(pool_server):
    url, _ = pool_server
    client(url).completions.create(model="warm", prompt="Hello", max_tokens=1)
    client(url).completions.create(model="cold", prompt="Hello", max_tokens=1)
    listed = {m["id"]: m for m in httpx.get(f"{url}/v1/models", timeout=30).json()["data"]}
    built_in = {"min_p": 0.0, "repetition_penalty": 1.0}
    assert listed["warm"]["sampling_defaults"] == {**built_in, "temperature": 0.7, "top_p": 0.8, "top_k": 40,
                                                   "min_p": 0.1, "max_tokens": 2}
    assert listed["cold"]["sampling_defaults"] == {**built_in, "temperature": 0.0, "top_p": 0.5, "top_k": 0,
                                                   "max_tokens": 3}
    assert listed["smollm2-135m"]["sampling_defaults"]["temperature"] == 0.3


def test_config_sampling_keys_are_read(tmp_path):
    entry = {"ref": "org/a", "name": "a", "temperature": 1, "top_p": 0.9, "top_k": 5, "min_p": 0, "max_tokens": 9}
    (spec,) = load_models_config(write(tmp_path, {"models": [entry]}))
    assert spec.sampling == SamplingDefaults(temperature=1.0, top_p=0.9, top_k=5, min_p=0.0, max_tokens=9)
    (plain,) = load_models_config(write(tmp_path, {"models": ["org/b"]}))
    assert plain.sampling == SamplingDefaults()


@pytest.mark.parametrize("key, value, says", [
    ("temperature", "hot", "temperature: must be a number, got 'hot'"),
    ("temperature", None, "temperature: must be a number, got None"),
    ("temperature", True, "temperature: must be a number, got True"),
    ("temperature", 3, "temperature must be between 0 and 2, got 3.0"),
    ("top_p", 0, "top_p must be greater than 0 and at most 1, got 0.0"),
    ("top_k", 2.5, "top_k: must be a whole number, got 2.5"),
    ("top_k", -1, "top_k must be at least 0 (0 turns it off), got -1"),
    ("min_p", [0.1], "min_p: must be a number, got [0.1]"),
    ("max_tokens", 0, "max_tokens must be at least 1, got 0"),
    ("max_tokens", "10", "max_tokens: must be a whole number, got '10'"),
])
def test_a_bad_sampling_key_is_one_line_naming_model_key_and_value(tmp_path, key, value, says):
    path = write(tmp_path, {"models": [{"name": "fast", "ref": "org/a", key: value}]})
    with pytest.raises(BadInputError) as info:
        load_models_config(path)
    assert info.value.message == f"{path}: models[0] (fast): {says}"


def test_serve_refuses_a_bad_sampling_key_before_loading_anything(tmp_path):
    path = write(tmp_path, {"models": [{"name": "fast", "ref": "org/a", "temperature": "hot"}]})
    result = run_cli("serve", "--models-config", str(path), "--port", "1")
    assert result.returncode == 4
    assert result.stderr.strip().splitlines()[0] == \
        f"mlxctl: error: {path}: models[0] (fast): temperature: must be a number, got 'hot'"
    unknown = write(tmp_path, {"models": [{"name": "fast", "ref": "org/a", "temprature": 0.5}]})
    result = run_cli("serve", "--models-config", str(unknown), "--port", "1")
    assert result.returncode == 4 and "models[0] (fast): unknown key 'temprature'" in result.stderr
