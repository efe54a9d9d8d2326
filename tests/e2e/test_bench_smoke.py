"""CI's bench-serve smoke run: the real `mlxctl serve` and the contract in docs/workloads/smoke.yaml."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from mlxctl.server.runner import free_port

ROOT = Path(__file__).resolve().parents[2]


def wait_healthy(url: str, proc: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise AssertionError("mlxctl serve did not become healthy")


@pytest.mark.slow  # 12 s end to end: the slow step (bench-serve is covered against a fake server)
def test_bench_serve_smoke_contract_passes_against_mlxctl_serve(model_home, smollm2):
    port = free_port()
    env = dict(os.environ, MLXCTL_HOME=str(model_home))
    serve = subprocess.Popen([sys.executable, "-m", "mlxctl", "serve", "--port", str(port)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, serve)
        bench = subprocess.run([sys.executable, "-m", "mlxctl", "bench-serve", "--url", url, "--workload",
                                str(ROOT / "docs/workloads/smoke.yaml"), "-c", "1,2", "--json"],
                               capture_output=True, text=True, timeout=300, env=env)
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(60)
    assert bench.returncode == 0, bench.stderr
    report = json.loads(bench.stdout)
    assert report["runs"] and all(r["metrics"]["failed"] == 0 for r in report["runs"])
    assert report["checks"]["cases"] >= 2 and report["checks"]["failed"] == 0
    assert serve.returncode == 0
