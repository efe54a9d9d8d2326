"""GET /metrics: Prometheus text whose figures agree with the requests served."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from mlxctl.engine.events import FinishEvent, FinishReason, Timings, Usage
from mlxctl.server.metrics import Metrics
from tests.server.infra import chat_body, require_chat

NAMES = ("mlxctl:time_to_first_token_seconds", "mlxctl:inter_token_latency_seconds",
         "mlxctl:e2e_request_latency_seconds", "mlxctl:request_queue_time_seconds",
         "mlxctl:num_requests_running", "mlxctl:num_requests_waiting", "mlxctl:prompt_tokens",
         "mlxctl:generation_tokens", "mlxctl:request_success", "mlxctl:kv_cache_usage_perc",
         "mlxctl:prefix_cache_queries", "mlxctl:prefix_cache_hits")


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """(sample name, sorted labels less model_name) -> value."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = tuple(sorted((k, v) for k, v in s.labels.items() if k != "model_name"))
            out[(s.name, labels)] = s.value
    return out


def finish(reason=FinishReason.STOP, prompt=10, completion=5, error=None) -> FinishEvent:
    timings = Timings(queue_s=0.01, ttft_s=0.2, prefill_s=0.1, decode_s=0.4, e2e_s=0.6,
                      prompt_tokens=prompt, completion_tokens=completion)
    return FinishEvent(reason, Usage(prompt, completion), timings, error=error)


def test_recording_a_finish_event():
    m = Metrics("m")
    m.record(finish())
    m.record(finish(FinishReason.LENGTH, prompt=3, completion=1))
    s = samples(m.render().decode())
    assert s[("mlxctl:prompt_tokens_total", ())] == 13
    assert s[("mlxctl:generation_tokens_total", ())] == 6
    assert s[("mlxctl:request_success_total", (("finished_reason", "stop"),))] == 1
    assert s[("mlxctl:request_success_total", (("finished_reason", "length"),))] == 1
    assert s[("mlxctl:time_to_first_token_seconds_count", ())] == 2
    assert s[("mlxctl:e2e_request_latency_seconds_sum", ())] == 1.2
    # per token, as vLLM: 4 gaps of 0.1 s for the first request, none for the one-token one
    assert s[("mlxctl:inter_token_latency_seconds_count", ())] == 4
    assert abs(s[("mlxctl:inter_token_latency_seconds_sum", ())] - 0.4) < 1e-9
    assert s[("mlxctl:prefix_cache_hits_total", ())] == 0


def test_errors_and_abandoned_requests_are_counted_not_timed():
    m = Metrics("m")
    m.record(finish(FinishReason.ERROR, error=RuntimeError("x")))
    m.record_abandoned()
    s = samples(m.render().decode())
    assert s[("mlxctl:request_success_total", (("finished_reason", "error"),))] == 1
    assert s[("mlxctl:request_success_total", (("finished_reason", "abort"),))] == 1
    assert s[("mlxctl:e2e_request_latency_seconds_count", ())] == 0


def test_each_app_has_its_own_registry():
    a, b = Metrics("a"), Metrics("b")
    a.record(finish())
    assert samples(b.render().decode())[("mlxctl:prompt_tokens_total", ())] == 0


def test_metrics_endpoint_parses_and_names_everything(base_url):
    r = httpx.get(f"{base_url}/metrics")
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/plain")
    names = {f.name for f in text_string_to_metric_families(r.text)}
    assert set(NAMES) <= names
    s = samples(r.text)
    assert s[("mlxctl:num_requests_running", ())] == 0


def test_counters_agree_with_requests_sent(base_url):
    require_chat(base_url)
    before = samples(httpx.get(f"{base_url}/metrics").text)
    usages = [httpx.post(f"{base_url}/v1/chat/completions", json=chat_body(max_tokens=n), timeout=60).json()["usage"]
              for n in (3, 5)]
    after = samples(httpx.get(f"{base_url}/metrics").text)

    def delta(key):
        return after.get(key, 0) - before.get(key, 0)

    assert delta(("mlxctl:prompt_tokens_total", ())) == sum(u["prompt_tokens"] for u in usages)
    assert delta(("mlxctl:generation_tokens_total", ())) == sum(u["completion_tokens"] for u in usages)
    assert delta(("mlxctl:e2e_request_latency_seconds_count", ())) == 2
    assert delta(("mlxctl:time_to_first_token_seconds_count", ())) == 2
    finished = sum(delta(("mlxctl:request_success_total", (("finished_reason", r),))) for r in ("stop", "length"))
    assert finished == 2
