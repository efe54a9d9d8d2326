"""The vLLM series /metrics gained: per-request token and phase histograms, preemptions, vLLM v0's
swap figures (always 0), and MLX's memory gauges."""

from __future__ import annotations

import httpx
import pytest

from mlxctl.server.metrics import TOKEN_BUCKETS, Metrics
from tests.server.metrics_text import scrape, value
from tests.server.test_metrics_vllm_names import MODEL, finish
from tests.server.infra import chat_body


def test_a_finished_request_fills_the_request_histograms():
    m = Metrics(MODEL)
    m.record(finish())
    text = m.render().decode()
    assert value(text, "mlxctl:request_prompt_tokens_sum") == 10
    assert value(text, "mlxctl:request_prompt_tokens_bucket", le="10.0") == 1
    assert value(text, "mlxctl:request_prompt_tokens_bucket", le="5.0") == 0
    assert value(text, "mlxctl:request_generation_tokens_sum") == 5
    assert value(text, "mlxctl:request_prefill_time_seconds_sum") == 0.1
    assert value(text, "mlxctl:request_decode_time_seconds_sum") == 0.4
    assert value(text, "mlxctl:request_inference_time_seconds_sum") == 0.5
    assert TOKEN_BUCKETS[:4] == (1, 2, 5, 10) and TOKEN_BUCKETS[-1] == 1_000_000  # vLLM's 1-2-5 buckets


def test_an_error_is_counted_not_measured():
    m = Metrics(MODEL, names="vllm")
    m.record(finish(error=RuntimeError("x")))
    text = m.render().decode()
    assert value(text, "vllm:request_success_total", finished_reason="stop") == 1
    assert value(text, "vllm:request_prompt_tokens_count") == 0


def test_preemptions_follow_the_engine_total_across_a_reload():
    m = Metrics(MODEL)
    m.set_engine({"preemptions": 2}, 0)
    m.set_engine({"preemptions": 3}, 0)
    m.set_engine({}, 0)  # unloaded: the engine's total starts again at 0
    m.set_engine({"preemptions": 1}, 0)
    assert value(m.render().decode(), "mlxctl:num_preemptions_total") == 4


def test_swap_figures_of_vllm_v0_are_zero():
    text = Metrics(MODEL, names="vllm").render().decode()
    assert 'vllm:num_requests_swapped{engine="0",model_name="smollm2-135m"} 0.0' in text.splitlines()
    assert 'vllm:cpu_cache_usage_perc{engine="0",model_name="smollm2-135m"} 0.0' in text.splitlines()


def test_memory_gauges_are_mlx_figures_at_scrape(base_url):
    import mlx.core as mx

    r = httpx.post(f"{base_url}/v1/chat/completions", json=chat_body(max_tokens=2), timeout=60)
    assert r.status_code == 200, r.text
    text = scrape(base_url)
    assert value(text, "mlxctl:memory_peak_bytes") == mx.get_peak_memory()
    assert value(text, "mlxctl:memory_limit_bytes") > 0
    assert 0 <= value(text, "mlxctl:kv_cache_usage_perc", model_name=MODEL) <= 1


def test_observing_a_value_many_times_at_once_equals_observing_it_one_by_one():
    from prometheus_client import CollectorRegistry, Histogram

    from mlxctl.server.metrics import ITL_BUCKETS, observe_times

    def samples(fill):
        hist = Histogram("h", "h", buckets=ITL_BUCKETS, registry=CollectorRegistry())
        fill(hist)
        return [(s.name, s.labels, s.value) for s in hist.collect()[0].samples if not s.name.endswith("_created")]

    for value_s, times in ((0.004, 127), (0.05, 1), (ITL_BUCKETS[3], 9), (1e6, 3)):  # on a bound; past the last
        one_by_one = samples(lambda h: [h.observe(value_s) for _ in range(times)])
        at_once = samples(lambda h: observe_times(h, value_s, times))
        assert at_once[:-1] == one_by_one[:-1]  # every bucket and the count
        assert at_once[-1][2] == pytest.approx(one_by_one[-1][2])  # the sum, up to rounding of many additions
        assert one_by_one[-2] == ("h_count", {}, times)
