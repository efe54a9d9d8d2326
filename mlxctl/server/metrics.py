"""Prometheus metrics, named after vLLM's: with our prefix (``mlxctl:``), with vLLM's own names
(``vllm:``) so its dashboards work unchanged, or both (``serve --metrics-names``; see
metrics_names.py and docs/serve.md).

Each app owns a :class:`Metrics` with its own CollectorRegistry. Per-request figures are
recorded when a request's stream ends (generate.generation), labelled with the model that
served it; queue gauges are read from each model's engine at scrape time.
"""

from __future__ import annotations

from bisect import bisect_left

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from mlxctl.engine.events import FinishEvent
from mlxctl.server.metrics_names import Series, names_for

CONTENT_TYPE = CONTENT_TYPE_LATEST
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
               20.0, 40.0, 80.0)
LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                   120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
# vLLM's 1-2-5 buckets up to max_model_len; one set for every model here, so up to 1M tokens
TOKEN_BUCKETS = tuple(m * 10 ** e for e in range(7) for m in (1, 2, 5) if m * 10 ** e <= 1_000_000)


def observe_times(hist: Histogram, value: float, times: int) -> None:
    """``hist.observe(value)`` done ``times`` times, in one step: a request's inter-token latency
    is one mean counted once per token, and observing it token by token cost the event loop
    ~1 us a token at every request's end. Falls back to the loop where prometheus_client's
    internals differ from the pinned version's."""
    try:
        bounds, buckets, total = hist._upper_bounds, hist._buckets, hist._sum
    except AttributeError:
        for _ in range(times):
            hist.observe(value)
        return
    total.inc(value * times)
    buckets[bisect_left(bounds, value)].inc(times)  # the first bucket whose bound holds it


class Metrics:
    def __init__(self, model_name: str, prefix_cache: bool = False, names: str = "mlxctl"):
        self.registry = CollectorRegistry(auto_describe=True)
        self.model_name, self.prefix_cache, self.naming = model_name, prefix_cache, names
        self._touch: list[Series] = []  # per-model series without labels of their own: 0 from the start
        self._histograms()
        self._counters()
        self._gauges()
        self._more()
        self._speculation()
        self._seen: dict[tuple[str, str], float] = {}  # (model, engine total) -> last value mirrored
        self._models: set[str] = set()
        self._for_model(model_name)

    def _histograms(self) -> None:
        self.ttft = self._make(Histogram, "time_to_first_token_seconds", "Time to first token.", buckets=TTFT_BUCKETS,
                               vllm=("time_to_first_token_seconds",))
        self.itl = self._make(Histogram, "inter_token_latency_seconds", "Time between output tokens.", buckets=ITL_BUCKETS,
                              vllm=("time_per_output_token_seconds", "inter_token_latency_seconds"))
        self.e2e = self._make(Histogram, "e2e_request_latency_seconds", "Arrival to finish.", buckets=LATENCY_BUCKETS,
                              vllm=("e2e_request_latency_seconds",))
        self.queue = self._make(Histogram, "request_queue_time_seconds", "Time spent waiting.", buckets=LATENCY_BUCKETS,
                                vllm=("request_queue_time_seconds",))

    def _counters(self) -> None:
        self.prompt_tokens = self._make(Counter, "prompt_tokens", "Prompt tokens processed.", vllm=("prompt_tokens",))
        self.generation_tokens = self._make(Counter, "generation_tokens", "Tokens generated.",
                                            vllm=("generation_tokens",))
        self.success = self._make(Counter, "request_success", "Finished requests by reason.",
                                  labels=("finished_reason",), vllm=("request_success",))
        self.prefix_queries = self._make(Counter, "prefix_cache_queries", "Prompt tokens looked up in the prefix cache.",
                                         vllm=("prefix_cache_queries",))
        self.prefix_hits = self._make(Counter, "prefix_cache_hits", "Prompt tokens found in the prefix cache.",
                                      vllm=("prefix_cache_hits",))
        self.prefix_bytes = self._make(Gauge, "prefix_cache_bytes", "Bytes of KV blocks kept by the prefix cache.")
        self.prefix_blocks = self._make(Gauge, "prefix_cache_blocks", "KV blocks kept by the prefix cache.")
        # engine-side totals, mirrored at each scrape (see set_engine)
        self.engine_totals = {
            key: self._make(Counter, name, doc) for key, name, doc in (
                ("evictions", "prefix_cache_evictions", "Prefix-cache blocks evicted from memory."),
                ("promoted_blocks", "prefix_cache_disk_hits", "Prefix-cache blocks read back from the disk tier."),
                ("disk_writes", "prefix_cache_disk_writes", "Prefix-cache blocks written to the disk tier."),
                ("disk_evictions", "prefix_cache_disk_evictions", "Prefix-cache blocks removed from the disk tier."),
                ("disk_errors", "prefix_cache_disk_errors", "Damaged disk-tier blocks dropped instead of served."),
            )}
        self.prefix_disk_bytes = self._make(Gauge, "prefix_cache_disk_bytes", "Bytes of KV blocks in the disk tier.")
        self.prefix_disk_blocks = self._make(Gauge, "prefix_cache_disk_blocks", "KV blocks in the disk tier.")

    def _gauges(self) -> None:
        self.running = self._make(Gauge, "num_requests_running", "Requests prefilling or decoding.",
                                  vllm=("num_requests_running",))
        self.waiting = self._make(Gauge, "num_requests_waiting", "Requests queued.", vllm=("num_requests_waiting",))
        self.kv_usage = self._make(Gauge, "kv_cache_usage_perc", "KV cache use, 0-1 (of the memory budget).",
                                   vllm=("kv_cache_usage_perc", "gpu_cache_usage_perc"))
        self.kv_bytes = self._make(Gauge, "kv_cache_bytes", "Bytes held by running requests' KV caches.")

    def _more(self) -> None:
        """The series added after the first release's: new families, after the others."""
        self.prompt_hist = self._make(Histogram, "request_prompt_tokens", "Prompt tokens per request.",
                                      buckets=TOKEN_BUCKETS, vllm=("request_prompt_tokens",))
        self.generation_hist = self._make(Histogram, "request_generation_tokens", "Generated tokens per request.",
                                          buckets=TOKEN_BUCKETS, vllm=("request_generation_tokens",))
        # vLLM: the most tokens any of a request's n sequences generated; each is a request here
        self.max_generation_hist = self._make(Histogram, None, "Generated tokens per request (vLLM: most of its n).",
                                              buckets=TOKEN_BUCKETS, vllm=("request_max_num_generation_tokens",))
        self.prefill_time = self._make(Histogram, "request_prefill_time_seconds", "First prefill chunk to first token.",
                                       buckets=LATENCY_BUCKETS, vllm=("request_prefill_time_seconds",))
        self.decode_time = self._make(Histogram, "request_decode_time_seconds", "First token to finish.",
                                      buckets=LATENCY_BUCKETS, vllm=("request_decode_time_seconds",))
        self.inference_time = self._make(Histogram, "request_inference_time_seconds", "Prefill and decode time.",
                                         buckets=LATENCY_BUCKETS, vllm=("request_inference_time_seconds",))
        self.preemptions = self._make(Counter, "num_preemptions",
                                      "Requests preempted (re-prefilled from their checkpoint after a failed step).",
                                      vllm=("num_preemptions",))
        # vLLM v0 figures its dashboard still plots: nothing is swapped to a CPU cache here
        self.swapped = self._make(Gauge, None, "Requests swapped out (always 0 here).", vllm=("num_requests_swapped",))
        self.cpu_cache = self._make(Gauge, None, "CPU KV cache use (always 0 here).", vllm=("cpu_cache_usage_perc",))
        self.memory = {key: self._make(Gauge, f"memory_{key}_bytes", doc, per_model=False) for key, doc in (
            ("active", "MLX memory in use by arrays (all models)."),
            ("peak", "Most MLX memory in use at once since start."),
            ("cache", "MLX memory freed and kept for reuse."),
            ("limit", "The memory the KV caches can grow into (MLX's limit, else RAM)."),
        )}

    def _speculation(self) -> None:
        """Speculative decoding's totals (``--speculative``; vLLM's spec_decode names), mirrored
        from the engine at each scrape."""
        self.spec_totals = {key: self._make(Counter, name, doc, vllm=(name,)) for key, name, doc in (
            ("steps", "spec_decode_num_drafts", "Drafts checked (one per request per speculative step)."),
            ("draft_tokens", "spec_decode_num_draft_tokens", "Draft tokens checked."),
            ("accepted_tokens", "spec_decode_num_accepted_tokens", "Draft tokens accepted."),
        )}

    def _make(self, kind, name: str | None, doc: str, labels: tuple[str, ...] = (), vllm: tuple[str, ...] = (),
              per_model: bool = True, **kwargs) -> Series:
        series = Series(kind, names_for(self.naming, name, vllm), doc, labels, per_model, self.registry, **kwargs)
        if per_model and not labels:
            self._touch.append(series)
        return series

    def _for_model(self, model: str) -> None:
        """A model's series without labels of their own start at 0 (as they did before any request)."""
        if model not in self._models:
            self._models.add(model)
            for series in self._touch:
                series.of(model)

    def record(self, finish: FinishEvent, model: str | None = None) -> None:
        """One finished request of ``model`` (the primary one if None): counted by reason; timed
        unless it ended in an error."""
        model = model or self.model_name
        self._for_model(model)
        self.success.of(model, finish.reason.value).inc()
        if finish.error is None:
            self._record_figures(finish, model)

    def _record_figures(self, finish: FinishEvent, model: str) -> None:
        t, usage = finish.timings, finish.usage
        self.prompt_tokens.of(model).inc(usage.prompt_tokens)
        self.generation_tokens.of(model).inc(usage.completion_tokens)
        self.e2e.of(model).observe(t.e2e_s)
        self.queue.of(model).observe(t.queue_s)
        if usage.completion_tokens:
            self.ttft.of(model).observe(t.ttft_s)
        if usage.completion_tokens > 1:  # per token, as vLLM counts it
            observe_times(self.itl.of(model), t.decode_s / (usage.completion_tokens - 1), usage.completion_tokens - 1)
        if self.prefix_cache:
            self.prefix_queries.of(model).inc(usage.prompt_tokens)
            self.prefix_hits.of(model).inc(usage.cached_tokens)
        self._record_request(finish, model)

    def _record_request(self, finish: FinishEvent, model: str) -> None:
        """vLLM's per-request histograms: sizes and phases."""
        t, usage = finish.timings, finish.usage
        self.prompt_hist.of(model).observe(usage.prompt_tokens)
        self.generation_hist.of(model).observe(usage.completion_tokens)
        self.max_generation_hist.of(model).observe(usage.completion_tokens)
        self.prefill_time.of(model).observe(t.prefill_s)
        self.decode_time.of(model).observe(t.decode_s)
        self.inference_time.of(model).observe(t.prefill_s + t.decode_s)

    def record_abandoned(self, model: str | None = None) -> None:
        """A request whose view left before its stream ended (a client disconnect)."""
        model = model or self.model_name
        self._for_model(model)
        self.success.of(model, "abort").inc()

    def set_engine(self, stats: dict, kv_budget: int, model: str | None = None) -> None:
        """``model``'s engine figures (the primary one if None), from ``engine.stats()``."""
        model = model or self.model_name
        self._for_model(model)
        self.running.of(model).set(len(stats.get("running", ())) + len(stats.get("prefilling", ())))
        self.waiting.of(model).set(len(stats.get("waiting", ())))
        kv = stats.get("kv_bytes", 0)
        self.kv_bytes.of(model).set(kv)
        self.kv_usage.of(model).set(kv / kv_budget if kv_budget else 0.0)
        prefix = stats.get("prefix_cache") or {}
        self.prefix_bytes.of(model).set(prefix.get("bytes", 0))
        self.prefix_blocks.of(model).set(prefix.get("blocks", 0))
        self.prefix_disk_bytes.of(model).set(prefix.get("disk_bytes", 0))
        self.prefix_disk_blocks.of(model).set(prefix.get("disk_blocks", 0))
        totals = {**{key: prefix.get(key, 0) for key in self.engine_totals}, "preemptions": stats.get("preemptions", 0)}
        for key, now in totals.items():
            self._mirror(self.engine_totals.get(key, self.preemptions), model, key, now)
        speculative = stats.get("speculative") or {}
        for key, counter in self.spec_totals.items():
            self._mirror(counter, model, f"speculative.{key}", speculative.get(key, 0))

    def _mirror(self, counter: Series, model: str, key: str, now: float) -> None:
        """A counter follows an engine total (which restarts at 0 when the model is reloaded)."""
        seen = self._seen.get((model, key), 0)
        if now > seen:
            counter.of(model).inc(now - seen)
        self._seen[(model, key)] = now

    def set_memory(self, figures: dict) -> None:
        """MLX's allocator figures (snapshot.memory()): one set for the whole process."""
        for key, gauge in self.memory.items():
            gauge.of().set(figures.get(f"{key}_bytes", 0))

    def render(self) -> bytes:
        return generate_latest(self.registry)
