"""`python -m mlxctl bench-serve` end to end against fake servers on loopback."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest

from mlxctl.errors import ExitStatus
from tests.bench.conftest import FIRST_DELAY, SLOW_FIRST_DELAY
from tests.cli.helpers import REPO, clean_env, run_cli

QUICK = ["--prompt-tokens", "16", "--output-tokens", "8"]
# Every request meets these unless something hangs: goodput is checked, not the machine's speed.
LOOSE_SLO = "ttft=600,e2e=600"
# What vs_first compares: its name -> the metric, and the statistic of it, in the run's report.
COMPARED = {"output_throughput": ("output_throughput", None), "request_throughput": ("request_throughput", None),
            "ttft_p50": ("ttft", "p50"), "tpot_p50": ("tpot", "p50"), "e2e_p50": ("e2e", "p50")}


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("bench-serve", *args)


def bench_json(*args: str) -> dict:
    result = bench(*args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_one_server_sweep(fake):
    report = bench_json("--url", fake.url, *QUICK, "-c", "1,2", "--slo", LOOSE_SLO)
    assert [run["concurrency"] for run in report["runs"]] == [1, 2]
    for run in report["runs"]:
        m = run["metrics"]
        assert m["requests"] == m["completed"] == 8 and m["failures"] == {}
        assert m["ttft"]["p50"] >= FIRST_DELAY and m["ttft"]["count"] == 8
        assert m["e2e"]["p50"] >= m["ttft"]["p50"]
        assert m["itl"]["count"] == 8 * 7 and m["output_tokens_mean"] == 8 and m["fixed_output_length"]
        assert m["prompt_tokens_mean"] >= 16 and m["output_tokens_from"] == "usage"
        assert m["output_throughput"] == pytest.approx(m["request_throughput"] * 8)
        assert m["goodput"] == pytest.approx(m["request_throughput"]) and m["good_fraction"] == 1.0
        assert run["server_metrics"]["prefix_cache_hit_rate"] == pytest.approx(0.4)
        assert run["server_metrics"]["mlxctl:request_success_total"] == 8  # warm-ups not counted
    assert report["servers"][0]["model"] == "fake-model" and report["servers"][0]["server_header"] == "fake/1.0"
    provenance = report["provenance"]
    assert provenance["command"].startswith("mlxctl bench-serve --url ")
    assert {"mlxctl_version", "python", "platform", "cpu_count", "timestamp"} <= set(provenance)


def test_two_servers_interleaved_with_ratios(fake, slow_fake, tmp_path):
    out = tmp_path / "runs.csv"
    report = bench_json("--url", fake.url, "--url", slow_fake.url, *QUICK, "-n", "4", "--repeats", "2", "--csv", str(out))
    assert [(r["label"], r["repeat"]) for r in report["runs"]] == [("A", 0), ("B", 0), ("A", 1), ("B", 1)]
    for a, b in zip(report["runs"][::2], report["runs"][1::2]):
        assert a["vs_first"] is None
        assert b["metrics"]["ttft"]["p50"] >= SLOW_FIRST_DELAY
        assert b["vs_first"] == pytest.approx(ratios(b, a))  # B's figures over A's, as both reported them
        assert b["server_metrics"] is None  # the slow fake has no /metrics
        assert not b["metrics"]["fixed_output_length"] and b["metrics"]["output_tokens_mean"] == 7
    assert report["servers"][1]["refused_fields"] == ["ignore_eos"]
    rows = list(csv.DictReader(out.open()))
    assert [row["label"] for row in rows] == ["A", "B", "A", "B"]
    for row, run in zip(rows[1::2], report["runs"][1::2]):
        assert {name: float(row[f"vs_first_{name}"]) for name in COMPARED} == pytest.approx(run["vs_first"])


def ratios(run: dict, base: dict) -> dict[str, float]:
    """Each figure vs_first compares, computed here from the two runs' reported metrics."""
    def pick(metrics: dict, metric: str, statistic: str | None) -> float:
        return metrics[metric][statistic] if statistic else metrics[metric]

    return {name: pick(run["metrics"], *key) / pick(base["metrics"], *key) for name, key in COMPARED.items()}


def test_request_rate_mode(fake):
    report = bench_json("--url", fake.url, *QUICK, "--request-rate", "40", "-n", "6", "--endpoint", "completions")
    (run,) = report["runs"]
    assert run["request_rate"] == 40 and run["concurrency"] is None
    assert run["metrics"]["completed"] == 6


def test_human_report_on_stdout(fake):
    result = bench("--url", fake.url, *QUICK, "-n", "2", "--warmup", "0")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"A: {fake.url}  model=fake-model  server=fake/1.0"
    assert lines[1].split()[:3] == ["server", "shape", "rep"]
    assert lines[2].split()[:5] == ["A", "in=16", "out=8", "conc=1", "1"]
    assert "\x1b[" not in result.stdout and result.stderr == ""


def test_workload_passes(fake, tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("cases:\n  - name: capital\n    prompt: capital of France?\n    checks: {finish_reason: stop, require: Paris}\n")
    report = bench_json("--url", fake.url, "--workload", str(path), "-c", "1,2")
    assert [case["passed"] for case in report["cases"]] == [True]
    assert report["cases"][0]["requests"] == 2 and report["checks"] == {"cases": 1, "failed": 0}


def test_failed_contract_exits_with_check_failed(fake):
    result = bench("--url", fake.url, "--workload", str(REPO / "docs" / "workloads" / "smoke.yaml"))
    assert result.returncode == ExitStatus.CHECK_FAILED
    assert "capital-of-france" in result.stdout and "FAIL" in result.stdout
    assert result.stderr.splitlines()[0] == "mlxctl: error: 1 of 2 workload cases failed their checks"


@pytest.mark.parametrize("args, message", [
    (["--slo", "latency=1"], "mlxctl: error: bad --slo item 'latency=1'"),
    (["--url", "localhost:8080"], "mlxctl: error: bad --url 'localhost:8080'"),
    (["-c", "1,two"], "mlxctl: error: bad --concurrency value 'two': expected an integer"),
    (["--endpoint", "embeddings"], "mlxctl: error: bad --endpoint 'embeddings'"),
])
def test_bad_arguments_are_one_line(args, message):
    result = bench(*args)
    assert result.returncode == ExitStatus.BAD_INPUT
    assert result.stderr.splitlines()[0] == message and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_unreachable_server():
    result = bench("--url", "http://127.0.0.1:9")
    assert result.returncode == ExitStatus.UNAVAILABLE
    assert result.stderr.startswith("mlxctl: error: cannot reach http://127.0.0.1:9: ")


def test_help_imports_no_http_client():
    code = ("import contextlib, io, sys\nfrom mlxctl.cli.app import main\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "    main(['bench-serve', '--help'])\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in {'httpx', 'aiohttp', 'mlx', 'rich'}))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "[]", result.stderr


def test_bench_never_imports_the_engine_or_mlx(fake):
    code = ("import sys\nfrom mlxctl.cli.app import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith(('mlx.', 'mlx_lm', 'mlxctl.engine', 'mlxctl.server')) or m == 'mlx'), file=sys.stderr)")
    args = ["bench-serve", "--url", fake.url, *QUICK, "-n", "1", "--warmup", "0", "--json"]
    result = subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=60)
    assert result.stderr.strip().splitlines()[-1] == "[]"
