"""Prometheus metrics, named after vLLM's with our prefix so its dashboards work unchanged.

Each app owns a :class:`Metrics` with its own CollectorRegistry. Per-request figures are
recorded when a request's stream ends (generate.generation); queue gauges are read from the
engine at scrape time.
"""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from mlxctl.engine.events import FinishEvent

PREFIX = "mlxctl:"
CONTENT_TYPE = CONTENT_TYPE_LATEST
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
               20.0, 40.0, 80.0)
LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
                   120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
LABELS = ("model_name",)


class Metrics:
    def __init__(self, model_name: str, prefix_cache: bool = False):
        self.registry = CollectorRegistry(auto_describe=True)
        self.model_name, self.prefix_cache = model_name, prefix_cache
        self._histograms()
        self._counters()
        self._gauges()

    def _histograms(self) -> None:
        self.ttft = self._make(Histogram, "time_to_first_token_seconds", "Time to first token.", buckets=TTFT_BUCKETS)
        self.itl = self._make(Histogram, "inter_token_latency_seconds", "Time between output tokens.", buckets=ITL_BUCKETS)
        self.e2e = self._make(Histogram, "e2e_request_latency_seconds", "Arrival to finish.", buckets=LATENCY_BUCKETS)
        self.queue = self._make(Histogram, "request_queue_time_seconds", "Time spent waiting.", buckets=LATENCY_BUCKETS)

    def _counters(self) -> None:
        self.prompt_tokens = self._make(Counter, "prompt_tokens", "Prompt tokens processed.")
        self.generation_tokens = self._make(Counter, "generation_tokens", "Tokens generated.")
        self.success = self._make(Counter, "request_success", "Finished requests by reason.",
                                  labels=("finished_reason",))
        self.prefix_queries = self._make(Counter, "prefix_cache_queries", "Prompt tokens looked up in the prefix cache.")
        self.prefix_hits = self._make(Counter, "prefix_cache_hits", "Prompt tokens found in the prefix cache.")
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
        self._seen: dict[str, float] = {}
        self.prefix_disk_bytes = self._make(Gauge, "prefix_cache_disk_bytes", "Bytes of KV blocks in the disk tier.")
        self.prefix_disk_blocks = self._make(Gauge, "prefix_cache_disk_blocks", "KV blocks in the disk tier.")

    def _gauges(self) -> None:
        self.running = self._make(Gauge, "num_requests_running", "Requests prefilling or decoding.")
        self.waiting = self._make(Gauge, "num_requests_waiting", "Requests queued.")
        self.kv_usage = self._make(Gauge, "kv_cache_usage_perc", "KV cache use, 0-1 (of the memory budget).")
        self.kv_bytes = self._make(Gauge, "kv_cache_bytes", "Bytes held by running requests' KV caches.")

    def _make(self, kind, name: str, doc: str, labels: tuple[str, ...] = (), **kwargs):
        metric = kind(PREFIX + name, doc, (*LABELS, *labels), registry=self.registry, **kwargs)
        if not labels:
            metric = metric.labels(self.model_name)
        return metric

    def record(self, finish: FinishEvent) -> None:
        """One finished request: counted by reason; timed unless it ended in an error."""
        self.success.labels(self.model_name, finish.reason.value).inc()
        if finish.error is None:
            self._record_figures(finish)

    def _record_figures(self, finish: FinishEvent) -> None:
        t, usage = finish.timings, finish.usage
        self.prompt_tokens.inc(usage.prompt_tokens)
        self.generation_tokens.inc(usage.completion_tokens)
        self.e2e.observe(t.e2e_s)
        self.queue.observe(t.queue_s)
        if usage.completion_tokens:
            self.ttft.observe(t.ttft_s)
        for _ in range(usage.completion_tokens - 1):  # per token, as vLLM counts it
            self.itl.observe(t.decode_s / (usage.completion_tokens - 1))
        if self.prefix_cache:
            self.prefix_queries.inc(usage.prompt_tokens)
            self.prefix_hits.inc(usage.cached_tokens)

    def record_abandoned(self) -> None:
        """A request whose view left before its stream ended (a client disconnect)."""
        self.success.labels(self.model_name, "abort").inc()

    def set_engine(self, stats: dict, kv_budget: int) -> None:
        self.running.set(len(stats.get("running", ())) + len(stats.get("prefilling", ())))
        self.waiting.set(len(stats.get("waiting", ())))
        kv = stats.get("kv_bytes", 0)
        self.kv_bytes.set(kv)
        self.kv_usage.set(kv / kv_budget if kv_budget else 0.0)
        prefix = stats.get("prefix_cache") or {}
        self.prefix_bytes.set(prefix.get("bytes", 0))
        self.prefix_blocks.set(prefix.get("blocks", 0))
        self.prefix_disk_bytes.set(prefix.get("disk_bytes", 0))
        self.prefix_disk_blocks.set(prefix.get("disk_blocks", 0))
        for key, counter in self.engine_totals.items():
            now = prefix.get(key, 0)
            if now > self._seen.get(key, 0):
                counter.inc(now - self._seen.get(key, 0))
            self._seen[key] = now

    def render(self) -> bytes:
        return generate_latest(self.registry)
