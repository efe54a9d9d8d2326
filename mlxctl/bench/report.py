"""The report: provenance, the servers, one record per measured run, and per-case verdicts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mlxctl.bench.plan import Shape
from mlxctl.bench.result import RequestResult
from mlxctl.bench.stats import ratio

RATIO_KEYS = {  # name in vs_first -> (metric, statistic or None)
    "output_throughput": ("output_throughput", None),
    "request_throughput": ("request_throughput", None),
    "ttft_p50": ("ttft", "p50"),
    "tpot_p50": ("tpot", "p50"),
    "e2e_p50": ("e2e", "p50"),
}


@dataclass
class ServerInfo:
    """One server under test as it described itself."""

    label: str
    url: str
    model: str
    models: Any = None  # the /v1/models answer
    server_header: str | None = None
    refused_fields: list[str] = field(default_factory=list)  # optional fields it answered 400 to


@dataclass
class RunRecord:
    """One measured run: a shape on one server, one repeat."""

    label: str
    url: str
    shape: Shape
    repeat: int
    metrics: dict[str, Any]
    server_metrics: dict[str, float] | None = None
    vs_first: dict[str, float | None] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"label": self.label, "url": self.url, **self.shape.as_dict(), "repeat": self.repeat,
                "metrics": self.metrics, "server_metrics": self.server_metrics, "vs_first": self.vs_first}


@dataclass
class CaseVerdict:
    """A workload case on one server, over every request of it that was measured."""

    label: str
    url: str
    case: str
    requests: int = 0
    failures: list[str] = field(default_factory=list)
    sample: str = ""

    @property
    def passed(self) -> bool:
        return self.requests > 0 and not self.failures

    def add(self, result: RequestResult) -> None:
        self.requests += 1
        self.sample = self.sample or result.text[:200]
        reasons = [f"{result.error_kind}: {result.error}"] if not result.ok else result.check_failures or []
        self.failures += [reason for reason in reasons if reason not in self.failures]

    def as_dict(self) -> dict[str, Any]:
        return {"label": self.label, "url": self.url, "case": self.case, "passed": self.passed,
                "requests": self.requests, "failures": self.failures, "sample": self.sample}


@dataclass
class Report:
    provenance: dict[str, Any]
    config: dict[str, Any]
    servers: list[ServerInfo]
    runs: list[RunRecord] = field(default_factory=list)
    cases: list[CaseVerdict] = field(default_factory=list)

    @property
    def failed_cases(self) -> list[CaseVerdict]:
        return [case for case in self.cases if not case.passed]

    def as_dict(self) -> dict[str, Any]:
        return {
            "provenance": self.provenance,
            "config": self.config,
            "servers": [vars(server) for server in self.servers],
            "runs": [run.as_dict() for run in self.runs],
            "cases": [case.as_dict() for case in self.cases],
            "checks": {"cases": len(self.cases), "failed": len(self.failed_cases)} if self.cases else None,
        }


def add_ratios(runs: list[RunRecord]) -> None:
    """Set each run's ``vs_first``: its key numbers over the first URL's for the same shape and repeat."""
    firsts = {(run.shape, run.repeat): run for run in runs if run.label == runs[0].label} if runs else {}
    for run in runs:
        base = firsts.get((run.shape, run.repeat))
        if base is not None and base is not run:
            run.vs_first = {name: ratio(_pick(run, *key), _pick(base, *key)) for name, key in RATIO_KEYS.items()}


def _pick(run: RunRecord, metric: str, statistic: str | None) -> float | None:
    value = run.metrics.get(metric)
    return value.get(statistic) if statistic and isinstance(value, dict) else value
