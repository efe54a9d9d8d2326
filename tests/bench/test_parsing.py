"""Parsing flags into a config: URLs, lists, SLOs; mistakes are one-line errors."""

from __future__ import annotations

import pytest

from mlxctl.bench.config import BenchConfig, parse_list, parse_url
from mlxctl.bench.prometheus import deltas, parse_metrics
from mlxctl.bench.slo import Slo, parse_slo
from mlxctl.bench.sse import parse_line
from mlxctl.errors import BadInputError


@pytest.mark.parametrize("text, base", [
    ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
    ("http://localhost:8000/", "http://localhost:8000"),
    ("https://host/v1", "https://host"),
    ("http://host:8000/proxy/v1/", "http://host:8000/proxy"),
])
def test_url_is_a_base(text, base):
    assert parse_url(text) == base


@pytest.mark.parametrize("text", ["localhost:8080", "ftp://host", "http://", "http://host:99999", "nonsense"])
def test_bad_url(text):
    with pytest.raises(BadInputError, match="bad --url"):
        parse_url(text)


def test_lists_split_on_commas_and_repeats():
    assert parse_list("-c", ["1,4", "16"], int) == (1, 4, 16)
    assert parse_list("-c", None, int, (1,)) == (1,)
    assert parse_list("--request-rate", ["0.5,inf"], float) == (0.5, float("inf"))
    with pytest.raises(BadInputError, match="bad -c value 'x'"):
        parse_list("-c", ["1,x"], int)


def test_slo():
    assert parse_slo("ttft=0.5, tpot=0.05,e2e=10") == Slo(0.5, 0.05, 10.0)
    assert parse_slo("E2E=2").as_dict() == {"e2e": 2.0}
    slo = Slo(ttft=0.5, e2e=1)
    assert slo.met_by(0.4, 99.0, 1.0) and not slo.met_by(0.6, None, 0.1)


@pytest.mark.parametrize("text, message", [
    ("latency=1", "bad --slo item 'latency=1'"), ("ttft=fast", "is not a number"),
    ("ttft=-1", "above 0"), ("", "--slo is empty"), ("ttft", "is not a number"),
])
def test_bad_slo(text, message):
    with pytest.raises(BadInputError, match=message):
        parse_slo(text)


def test_config_validates():
    with pytest.raises(BadInputError, match="--endpoint"):
        BenchConfig(urls=("http://h",), endpoint="embeddings")
    with pytest.raises(BadInputError, match="--concurrency 0"):
        BenchConfig(urls=("http://h",), concurrency=(0,))
    config = BenchConfig(urls=("http://h",))
    assert config.requests_for(1) == 8 and config.requests_for(16) == 64 and config.warmup_for(4) == 4


def test_sse_lines():
    assert parse_line(": keep-alive") is None
    assert parse_line("data: [DONE]").done
    role = parse_line('data: {"choices":[{"delta":{"role":"assistant"}}]}')
    assert not role.has_output
    chat = parse_line('data: {"choices":[{"delta":{"content":"Hi"},"finish_reason":null}]}')
    assert chat.has_output and chat.text == "Hi"
    thinking = parse_line('data: {"choices":[{"delta":{"reasoning_content":"hm"}}]}')
    assert thinking.has_output and thinking.text == ""
    text = parse_line('data: {"choices":[{"text":"a","finish_reason":"length"}]}')
    assert text.text == "a" and text.finish_reason == "length"
    usage = parse_line('data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}')
    assert usage.usage["completion_tokens"] == 2 and not usage.has_output
    assert parse_line('data: {"error":{"message":"boom"}}').error == "boom"
    assert "malformed" in parse_line("data: {nope").error


METRICS = """# HELP mlxctl:prefix_cache_queries_total Prompt tokens looked up.
# TYPE mlxctl:prefix_cache_queries_total counter
mlxctl:prefix_cache_queries_total 100.0
mlxctl:prefix_cache_hits_total 25.0
mlxctl:request_success_total{finished_reason="stop",model_name="m"} 3.0
mlxctl:request_success_total{finished_reason="length",model_name="m"} 2.0
mlxctl:e2e_request_latency_seconds_bucket{le="0.1"} 4.0
mlxctl:e2e_request_latency_seconds_sum 1.5
vllm:num_requests_waiting{model_name="x y}"} 2.0 1700000000
python_gc_objects_collected_total 12.0
"""


def test_prometheus_text():
    parsed = parse_metrics(METRICS)
    assert parsed == {
        "mlxctl:prefix_cache_queries_total": 100.0, "mlxctl:prefix_cache_hits_total": 25.0,
        "mlxctl:request_success_total": 5.0, "mlxctl:e2e_request_latency_seconds_sum": 1.5,
        "vllm:num_requests_waiting": 2.0,
    }


def test_prometheus_deltas_and_hit_rate():
    before = {"mlxctl:prefix_cache_queries_total": 100.0, "mlxctl:prefix_cache_hits_total": 25.0}
    after = {"mlxctl:prefix_cache_queries_total": 300.0, "mlxctl:prefix_cache_hits_total": 125.0}
    assert deltas(before, after) == {"mlxctl:prefix_cache_hits_total": 100.0,
                                     "mlxctl:prefix_cache_queries_total": 200.0, "prefix_cache_hit_rate": 0.5}
    assert deltas(None, after) is None


def test_models_one_for_all_or_one_per_url():
    urls = ("http://a", "http://b")
    assert BenchConfig(urls=urls).model_for(1) is None
    assert BenchConfig(urls=urls, models=("m",)).model_for(1) == "m"
    assert BenchConfig(urls=urls, models=("m", "n")).model_for(1) == "n"
    with pytest.raises(BadInputError, match="3 --model names for 2 --url"):
        BenchConfig(urls=urls, models=("m", "n", "o"))
