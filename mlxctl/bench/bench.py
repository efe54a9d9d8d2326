"""bench-serve end to end: connect to each server, walk the plan, collect the report."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Callable
from typing import Any

import httpx

from mlxctl.bench import plan, prometheus
from mlxctl.bench.client import ServerClient, fetch_models
from mlxctl.bench.config import BenchConfig
from mlxctl.bench.metrics import run_metrics
from mlxctl.bench.plan import Shape, Step
from mlxctl.bench.progress import NoBar
from mlxctl.bench.prompts import prompt_rng, synthetic_prompt
from mlxctl.bench.provenance import provenance
from mlxctl.bench.report import CaseVerdict, Report, RunRecord, ServerInfo, add_ratios
from mlxctl.bench.result import RequestResult
from mlxctl.bench.runner import closed_loop, on_schedule
from mlxctl.bench.schedule import poisson_arrivals
from mlxctl.bench.spec import RequestSpec
from mlxctl.bench.workload import load_workload
from mlxctl.errors import BadInputError, UnavailableError

Progress = Callable[[str], None]


def run_bench(config: BenchConfig, progress: Progress = lambda _: None, argv: list[str] | None = None,
              bar: Any = None) -> Report:
    """Benchmark every URL of ``config`` and return the report (the one library call of the CLI).
    ``progress`` gets a line per warm-up and measured run; ``bar`` (``progress.Bar``) also
    counts runs and requests as they finish."""
    cases = load_workload(config.workload) if config.workload else None
    return asyncio.run(_bench(config, cases, progress, argv, bar or NoBar()))


async def _bench(config: BenchConfig, cases: tuple[RequestSpec, ...] | None, progress: Progress, argv,
                 bar: Any) -> Report:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(config.timeout, connect=10.0)) as http:
        servers = [await _connect(http, config, index, url) for index, url in enumerate(config.urls)]
        clients = [ServerClient(http, s.url, config.endpoint, s.model, config.api_key, config.timeout) for s in servers]
        report = Report(provenance(argv), _config_dict(config), servers)
        await Bench(config, cases, clients, report, progress, bar).walk()
    for server, client in zip(servers, clients):
        server.refused_fields = sorted(client.refused)
    add_ratios(report.runs)
    return report


class Bench:
    """The walk through the plan: one step (warm-up or measured run) at a time."""

    def __init__(self, config: BenchConfig, cases, clients: list[ServerClient], report: Report, progress: Progress,
                 bar: Any = None):
        self.config, self.cases, self.clients, self.report, self.progress = config, cases, clients, report, progress
        self.bar = bar or NoBar()
        self.verdicts: dict[tuple[int, str], CaseVerdict] = {}

    async def walk(self) -> None:
        shapes = plan.shapes(self.config, workload=self.cases is not None)
        measured = len(shapes) * len(self.clients) * self.config.repeats
        counter = itertools.count(1)
        self.bar.plan(measured)
        for step in plan.steps(shapes, len(self.clients), self.config.repeats):
            if step.is_warmup:
                await self._warm_up(step)
            else:
                await self._measure(step, f"[{next(counter)}/{measured}]")
        self.report.cases = list(self.verdicts.values())

    async def _warm_up(self, step: Step) -> None:
        server = self.report.servers[step.url_index]
        specs = self._specs(step, self.config.warmup_for(step.shape.concurrency or 1))
        if specs:
            self.progress(f"warm-up {server.label} {step.shape.label()}: {len(specs)} requests")
            self.bar.step(f"warm-up {server.label} {step.shape.label()}", len(specs))
            await closed_loop(self._counted(self.clients[step.url_index]), specs, step.shape.concurrency or 1)

    async def _measure(self, step: Step, position: str) -> None:
        client, server = self.clients[step.url_index], self.report.servers[step.url_index]
        specs = self._specs(step, self._count(step.shape))
        before = await prometheus.scrape(client.http, client.base_url, client.headers)
        self.bar.step(f"{position} {server.label} {step.shape.label()}", len(specs))
        results, duration = await self._send_all(client, step, specs)
        after = await prometheus.scrape(client.http, client.base_url, client.headers)
        metrics = run_metrics(results, duration, self.config.slo)
        self.report.runs.append(RunRecord(server.label, server.url, step.shape, step.repeat, metrics, prometheus.deltas(before, after)))
        self._judge(step.url_index, results)
        self.progress(f"{position} {server.label} {step.shape.label()} repeat {step.repeat + 1}: {_summary(metrics)}")
        self.bar.run_done()

    def _counted(self, client: ServerClient):
        """``client.send`` that also ticks the bar when a request is done."""
        async def send(spec: RequestSpec) -> RequestResult:
            result = await client.send(spec)
            self.bar.tick()
            return result
        return send

    async def _send_all(self, client: ServerClient, step: Step, specs: list[RequestSpec]) -> tuple[list[RequestResult], float]:
        shape = step.shape
        send = self._counted(client)
        if shape.request_rate is None:
            return await closed_loop(send, specs, shape.concurrency or 1)
        arrivals = poisson_arrivals(len(specs), shape.request_rate, seed=_seed(self.config, shape, step.repeat))
        return await on_schedule(send, specs, arrivals, shape.concurrency)

    def _count(self, shape: Shape) -> int:
        if self.cases is not None and self.config.num_requests is None:
            return len(self.cases)
        return self.config.requests_for(shape.concurrency or 1)

    def _specs(self, step: Step, count: int) -> list[RequestSpec]:
        if self.cases is not None:
            return [self.cases[i % len(self.cases)] for i in range(count)]
        phase = "warmup" if step.is_warmup else step.repeat
        return [self._synthetic(step.shape, phase, i) for i in range(count)]

    def _synthetic(self, shape: Shape, phase: object, index: int) -> RequestSpec:
        rng = prompt_rng(self.config.seed, shape.label(), phase, index)
        return RequestSpec(name=f"synthetic-{index}", prompt=synthetic_prompt(shape.prompt_tokens, rng),
                           max_tokens=shape.output_tokens, ignore_eos=self.config.ignore_eos)

    def _judge(self, url_index: int, results: list[RequestResult]) -> None:
        if self.cases is None:
            return
        server = self.report.servers[url_index]
        for result in results:
            key = (url_index, result.name)
            self.verdicts.setdefault(key, CaseVerdict(server.label, server.url, result.name)).add(result)


def _seed(config: BenchConfig, shape: Shape, repeat: int | None) -> str:
    return f"{config.seed}:{shape.label()}:{repeat}"


def _summary(metrics: dict[str, Any]) -> str:
    ttft = metrics["ttft"]["p50"]
    parts = [f"{metrics['completed']}/{metrics['requests']} ok"]
    if metrics["output_throughput"] is not None:
        parts.append(f"{metrics['output_throughput']:.1f} output tok/s")
    if ttft is not None:
        parts.append(f"TTFT p50 {ttft * 1000:.0f} ms")
    return ", ".join(parts)


async def _connect(http: httpx.AsyncClient, config: BenchConfig, index: int, url: str) -> ServerInfo:
    """Ask a server for its models; the benchmarked model is --model or the first it lists."""
    try:
        status, models, header = await fetch_models(http, url, config.api_key)
    except httpx.HTTPError as exc:
        raise UnavailableError(f"cannot reach {url}: {_reason(exc)}", hint="is the server running? start one with: mlxctl serve") from None
    if status in (401, 403):
        raise BadInputError(f"{url} refused the request ({status})", hint="pass its key with --api-key")
    model = config.model_for(index) or _first_model(models)
    if model is None:
        raise BadInputError(f"{url}/v1/models gave no model id (HTTP {status})", hint="name the model with --model")
    return ServerInfo(_label(index), url, model, models, header)


def _first_model(models: Any) -> str | None:
    data = models.get("data") if isinstance(models, dict) else None
    if isinstance(data, list) and data and isinstance(data[0], dict):
        return data[0].get("id")
    return None


def _reason(exc: httpx.HTTPError) -> str:
    return str(exc) or type(exc).__name__


def _label(index: int) -> str:
    return chr(ord("A") + index) if index < 26 else f"S{index + 1}"


def _config_dict(config: BenchConfig) -> dict[str, Any]:
    data = dataclasses.asdict(config)
    data["slo"] = config.slo.as_dict()
    data["workload"] = str(config.workload) if config.workload else None
    data["api_key"] = "***" if config.api_key else None
    return data
