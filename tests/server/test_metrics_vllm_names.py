"""`serve --metrics-names mlxctl|vllm|both`: our series under vLLM's own names, so vLLM's Grafana
dashboard works unchanged; the default output is today's."""

from __future__ import annotations

import openai
import pytest

from mlxctl.engine.events import FinishEvent, FinishReason, Timings, Usage
from mlxctl.errors import ExitStatus
from mlxctl.server.metrics import Metrics
from tests.cli.helpers import run_cli
from tests.server.metrics_text import FIXTURES, families, fixture_rows, samples, scrape, value, without_created

MODEL = "smollm2-135m"


def finish(reason=FinishReason.STOP, error=None) -> FinishEvent:
    timings = Timings(queue_s=0.01, ttft_s=0.2, prefill_s=0.1, decode_s=0.4, e2e_s=0.6,
                      prompt_tokens=10, completion_tokens=5)
    return FinishEvent(reason, Usage(10, 5, 4), timings, error=error)


def recorded(names: str) -> str:
    """The text of a Metrics that saw what mlxctl_names_before.txt was captured from."""
    m = Metrics(MODEL, prefix_cache=True, names=names)
    m.record(finish())
    m.record(finish(FinishReason.ERROR, error=RuntimeError("x")))
    m.record_abandoned()
    m.set_engine({"running": [1], "prefilling": [], "waiting": [1, 2], "kv_bytes": 1024,
                  "prefix_cache": {"bytes": 10, "blocks": 1, "evictions": 3, "disk_bytes": 5, "disk_blocks": 2}}, 4096)
    return m.render().decode()


def chat(url: str) -> None:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    out = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=4,
                                         temperature=0)
    assert out.usage.completion_tokens > 0


def test_the_default_output_starts_with_todays_byte_for_byte():
    """mlxctl_names_before.txt: the same figures rendered by the code before --metrics-names; the
    new series are families after those (the time each series began aside)."""
    before = without_created((FIXTURES / "mlxctl_names_before.txt").read_text())
    now = without_created(recorded("mlxctl"))
    assert now.startswith(before)
    assert "vllm:" not in now


def test_every_series_the_vllm_dashboard_queries_is_exported(serve):
    url = serve(metrics_names="vllm")
    chat(url)
    text = scrape(url)
    for name, *labels in fixture_rows("vllm_grafana_series.txt"):
        found = [s for s in samples(text) if s.name == name and s.labels.get("model_name") == MODEL]
        assert found, f"{name} is not exported for {MODEL}"
        assert all(set(labels) <= set(s.labels) for s in found), (name, found[0].labels)
    assert value(text, "vllm:request_success_total", model_name=MODEL) == 1
    assert value(text, "vllm:request_prompt_tokens_count", model_name=MODEL) == 1


def test_vllm_names_have_vllm_types_labels_and_buckets():
    exported = families(recorded("vllm"))
    for name, kind, labels, buckets in fixture_rows("vllm_loggers_series.txt"):
        family = exported[name]
        assert family.type == kind, name
        sample = next(s for s in family.samples if not s.name.endswith("_created"))
        assert set(sample.labels) - {"le"} == set(labels.split(",")), name
        if buckets != "-":
            les = [s.labels["le"] for s in family.samples if s.name.endswith("_bucket")]
            assert [float(le) for le in les[:-1]] == [float(b) for b in buckets.split(",")], name


def test_both_exports_each_figure_under_both_names_with_equal_values():
    text = recorded("both")
    for ours, theirs in [("mlxctl:prompt_tokens_total", "vllm:prompt_tokens_total"),
                         ("mlxctl:inter_token_latency_seconds_count", "vllm:time_per_output_token_seconds_count"),
                         ("mlxctl:inter_token_latency_seconds_count", "vllm:inter_token_latency_seconds_count"),
                         ("mlxctl:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
                         ("mlxctl:request_prefill_time_seconds_sum", "vllm:request_prefill_time_seconds_sum")]:
        assert value(text, ours, model_name=MODEL) == value(text, theirs, model_name=MODEL) > 0, (ours, theirs)
    assert value(text, "vllm:request_success_total", finished_reason="abort") == 1


def test_series_vllm_has_no_name_for_keep_ours_under_vllm():
    names = families(recorded("vllm"))
    assert {"mlxctl:prefix_cache_bytes", "mlxctl:kv_cache_bytes", "mlxctl:memory_active_bytes",
            "mlxctl:prefix_cache_evictions"} <= set(names)
    assert "mlxctl:prompt_tokens" not in names and "mlxctl:num_requests_running" not in names


def test_an_unknown_naming_is_refused():
    with pytest.raises(ValueError, match="mlxctl, vllm, both"):
        Metrics(MODEL, names="prometheus")


def test_serve_refuses_an_unknown_naming_in_one_line():
    result = run_cli("serve", "--metrics-names", "vLLM", "--model", "/no/such/model")
    assert result.returncode == ExitStatus.BAD_INPUT
    assert result.stderr.splitlines() == [
        "mlxctl: error: --metrics-names must be mlxctl, vllm or both, got 'vLLM'",
        "hint: vllm exports vLLM's own series names, for its Grafana dashboards",
    ]
