"""/metrics with several models (serve -m NAME=REF, --models-config): each request's series carry
the model that served it as model_name, and each model has its own gauges and preemptions."""

from __future__ import annotations

import httpx
import pytest

from mlxctl.engine.engine import Engine, EngineConfig
from mlxctl.models.loader import LoadedModel
from mlxctl.server.app import init_app
from mlxctl.server.residency import ModelPool
from mlxctl.server.runner import BackgroundServer
from mlxctl.server.settings import ServeSettings
from tests.engine.test_recovery import Faults
from tests.engine.tiny import tiny_llama
from tests.server.metrics_text import scrape, value
from tests.server.test_residency import PROMPT, VOCAB, complete, tiny_engine

PRIMARY = "smollm2-135m"


def failing_once_engine(tokenizer):
    """A tiny model whose third engine step fails: the request in flight is preempted and resumed."""
    def make() -> Engine:
        model = tiny_llama(seed=3, vocab=VOCAB)
        loaded = LoadedModel(model, tokenizer, {"vocab_size": VOCAB}, 512, set(), "tiny-3")
        return Engine(lambda: loaded, EngineConfig(fault_hook=Faults(2), retry_backoff_s=0.001))
    return make


@pytest.fixture
def daemon(engine):
    """(url, pool): SmolLM2 as primary, two tiny models beside it, exporting both namings."""
    pool = ModelPool(default_keep_alive_s=None)
    pool.add("tiny-a", "preset", tiny_engine(1, engine.model.tokenizer))
    pool.add("tiny-b", "preset", failing_once_engine(engine.model.tokenizer))
    server = BackgroundServer(init_app(engine, ServeSettings(model_name=PRIMARY, metrics_names="both"), pool)).start()
    yield server.url, pool
    server.submit(pool.close()).result(30)
    server.stop()


def test_each_request_is_labelled_with_the_model_that_served_it(daemon):
    url, _ = daemon
    before = scrape(url)
    a = complete(url, "tiny-a", n=3)["usage"]
    primary = complete(url, PRIMARY, n=2)["usage"]
    text = scrape(url)
    for prefix in ("mlxctl:", "vllm:"):
        assert value(text, prefix + "prompt_tokens_total", model_name="tiny-a") == a["prompt_tokens"] == len(PROMPT)
        assert value(text, prefix + "generation_tokens_total", model_name="tiny-a") == a["completion_tokens"]
        assert value(text, prefix + "request_success_total", model_name="tiny-a") == 1
        assert value(text, prefix + "request_prompt_tokens_count", model_name="tiny-a") == 1
        delta = (value(text, prefix + "generation_tokens_total", model_name=PRIMARY)
                 - value(before, prefix + "generation_tokens_total", model_name=PRIMARY))
        assert delta == primary["completion_tokens"]  # the primary's own, not tiny-a's too
        assert value(text, prefix + "request_success_total", model_name="tiny-b") == 0


def test_each_model_has_its_gauges(daemon):
    url, _ = daemon
    complete(url, "tiny-a", n=2)
    text = scrape(url)
    names = {s for s in text.splitlines() if s.startswith("vllm:num_requests_running{")}
    assert {f'vllm:num_requests_running{{engine="0",model_name="{m}"}} 0.0' for m in (PRIMARY, "tiny-a", "tiny-b")} <= names
    assert 'mlxctl:kv_cache_usage_perc{model_name="tiny-a"} 0.0' in text.splitlines()


def test_preemptions_are_counted_for_the_model_whose_step_failed(daemon):
    url, _ = daemon
    r = httpx.post(f"{url}/v1/completions", timeout=120, json={"model": "tiny-b", "prompt": PROMPT,
                                                              "max_tokens": 8, "ignore_eos": True})
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 8, r.text  # resumed, invisible
    text = scrape(url)
    assert value(text, "vllm:num_preemptions_total", model_name="tiny-b") == 1
    assert value(text, "mlxctl:num_preemptions_total", model_name="tiny-b") == 1
    assert value(text, "vllm:num_preemptions_total", model_name=PRIMARY) == 0
