"""Metrics from request results, and the report as a table, JSON and CSV."""

from __future__ import annotations

import csv
import io
import json

import pytest

from mlxctl.bench.metrics import run_metrics
from mlxctl.bench.plan import Shape
from mlxctl.bench.report import CaseVerdict, Report, RunRecord, ServerInfo, add_ratios
from mlxctl.bench.result import RequestResult
from mlxctl.bench.slo import Slo
from mlxctl.bench.csv_report import csv_text
from mlxctl.bench.table import render_report

SHAPE = Shape(128, 4, 2)


def result(first: float, gap: float, tokens: int = 4, **fields) -> RequestResult:
    times = [first + gap * i for i in range(tokens)]
    return RequestResult("r", 4, ok=True, chunk_times=times, e2e=times[-1] + 0.001, prompt_tokens=130,
                         completion_tokens=tokens, ignore_eos_sent=True, **fields)


def test_request_timings():
    r = result(0.1, 0.02)
    assert r.ttft == 0.1
    assert r.itl == pytest.approx([0.02] * 3)
    assert r.tpot == pytest.approx((r.e2e - 0.1) / 3)


def test_run_metrics():
    results = [result(0.1, 0.01), result(0.3, 0.01), RequestResult("r", 4).fail("http_500", "boom"),
               RequestResult("r", 4).fail("timeout", "slow")]
    m = run_metrics(results, duration=2.0, slo=Slo(ttft=0.2))
    assert (m["requests"], m["completed"], m["failed"]) == (4, 2, 2)
    assert m["failures"] == {"http_500": 1, "timeout": 1}
    assert m["failure_examples"] == {"http_500": "boom", "timeout": "slow"}
    assert m["request_throughput"] == 1.0
    assert m["output_throughput"] == 4.0
    assert m["total_token_throughput"] == (8 + 260) / 2
    assert m["ttft"]["mean"] == pytest.approx(0.2) and m["ttft"]["count"] == 2
    assert m["itl"]["count"] == 6
    assert m["goodput"] == 0.5 and m["good_fraction"] == 0.25
    assert m["fixed_output_length"] is True and m["output_tokens_from"] == "usage"


def test_contract_failures_count_and_spoil_goodput():
    bad = result(0.1, 0.01, check_failures=["missing /x/"])
    m = run_metrics([bad, result(0.1, 0.01, check_failures=[])], 1.0, Slo(e2e=10))
    assert m["failures"] == {"contract": 1}
    assert m["failure_examples"] == {"contract": "r: missing /x/"}
    assert m["goodput"] == 1.0


def test_tokens_counted_from_chunks_without_usage():
    r = result(0.1, 0.01, tokens=3)
    r.completion_tokens, r.ignore_eos_sent = None, False
    m = run_metrics([r], 1.0, Slo())
    assert m["output_tokens_mean"] == 3 and m["output_tokens_from"] == "chunks"
    assert m["goodput"] is None and m["fixed_output_length"] is False


def sample_report() -> Report:
    servers = [ServerInfo("A", "http://a", "m"), ServerInfo("B", "http://b", "m", refused_fields=["ignore_eos"])]
    fast = run_metrics([result(0.1, 0.01)] * 4, 1.0, Slo())
    slow = run_metrics([result(0.2, 0.01)] * 2, 1.0, Slo())
    runs = [RunRecord("A", "http://a", SHAPE, 0, fast), RunRecord("B", "http://b", SHAPE, 0, slow)]
    case = CaseVerdict("A", "http://a", "capital")
    case.add(result(0.1, 0.01, check_failures=["missing /Paris/"]))
    report = Report({"mlxctl_version": "0"}, {}, servers, runs, [case])
    add_ratios(report.runs)
    return report


def test_ratios_against_the_first_url():
    report = sample_report()
    assert report.runs[0].vs_first is None
    vs = report.runs[1].vs_first
    assert vs["output_throughput"] == pytest.approx(0.5)
    assert vs["ttft_p50"] == pytest.approx(2.0)


def test_plain_table():
    text = render_report(sample_report(), color=False)
    assert "\x1b[" not in text
    lines = text.splitlines()
    assert lines[:2] == ["A: http://a  model=m", "B: http://b  model=m"]
    row_b = next(line for line in lines if line.startswith("B ") and "in=128" in line)
    assert "0.50x" in row_b and "200.0 ms" in row_b
    assert any(line.split()[:4] == ["A", "capital", "FAIL", "missing"] for line in lines)
    assert "B refused ignore_eos: sent without; outputs were not fixed-length" in lines
    assert lines[-1] == "checks: 0/1 cases passed"


def test_color_table_has_escapes():
    assert "\x1b[" in render_report(sample_report(), color=True)


def test_json_document():
    document = json.loads(json.dumps(sample_report().as_dict()))
    assert [run["label"] for run in document["runs"]] == ["A", "B"]
    assert document["runs"][0]["concurrency"] == 2 and document["runs"][0]["prompt_tokens"] == 128
    assert document["cases"][0] == {"label": "A", "url": "http://a", "case": "capital", "passed": False,
                                    "requests": 1, "failures": ["missing /Paris/"], "sample": ""}
    assert document["checks"] == {"cases": 1, "failed": 1}
    assert document["servers"][1]["refused_fields"] == ["ignore_eos"]


def test_csv():
    rows = list(csv.DictReader(io.StringIO(csv_text(sample_report()))))
    assert [row["label"] for row in rows] == ["A", "B"]
    assert float(rows[0]["ttft_p50"]) == pytest.approx(0.1)
    assert rows[0]["vs_first_output_throughput"] == ""
    assert float(rows[1]["vs_first_output_throughput"]) == pytest.approx(0.5)


def test_failures_are_noted_with_their_first_message():
    failed = run_metrics([RequestResult("r", 4).fail("http_404", "no such model: m")] * 2, 1.0, Slo())
    report = Report({}, {}, [ServerInfo("A", "http://a", "m")], [RunRecord("A", "http://a", SHAPE, 0, failed)])
    assert "failures: A http_404: 2 (first: no such model: m)" in render_report(report).splitlines()
