"""`mlxctl serve` as users run it: a subprocess that listens, loads, and drains on SIGTERM."""

from __future__ import annotations

import re
import signal
import subprocess
import sys

import httpx
import pytest

from mlxctl.server.runner import free_port
from tests.cli.helpers import REPO, clean_env
from tests.server.infra import MODEL, long_stream_body, sse_data, wait_until


@pytest.fixture
def served(smollm2):
    """(process, base URL) of `mlxctl serve` on the test model, with a short drain."""
    port = free_port()
    args = [sys.executable, "-m", "mlxctl", "serve", "-m", str(smollm2.path), "--port", str(port),
            "--served-model-name", MODEL, "--drain-grace", "1", "--log-format", "json"]
    proc = subprocess.Popen(args, cwd=REPO, env=clean_env(), stderr=subprocess.PIPE, text=True)
    yield proc, read_url(proc)
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


def read_url(proc: subprocess.Popen) -> str:
    for line in proc.stderr:
        if match := re.search(r"listening on (http://\S+)", line):
            return match.group(1)
    raise AssertionError(f"serve exited ({proc.wait()}) without printing its URL")


def test_serve_loads_and_drains_on_sigterm(served):
    proc, url = served
    assert wait_until(lambda: _health(url) == 200, timeout=120, interval=0.25)
    if httpx.post(f"{url}/v1/chat/completions", json={}, timeout=60).status_code == 404:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 0
        pytest.skip("/v1/chat/completions is not routed yet")
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=long_stream_body(), timeout=60) as r:
        lines = r.iter_lines()
        next(line for line in lines if line.startswith("data: "))
        proc.send_signal(signal.SIGTERM)
        assert wait_until(lambda: _health(url) == 503)
        events = sse_data(lines)
    assert '"error"' in events[-1] and "shutting down" in events[-1]
    assert proc.wait(120) == 0
    log = proc.stderr.read()
    assert '"path": "/v1/chat/completions"' in log


def _health(url: str) -> int:
    try:
        return httpx.get(f"{url}/health", timeout=5).status_code
    except httpx.TransportError:
        return 0
