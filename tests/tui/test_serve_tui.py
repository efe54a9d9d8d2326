"""`mlxctl serve --tui`: the server and its live view in one terminal (driven through a pty)."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time

import httpx
import pytest

from mlxctl.server.runner import free_port
from tests.cli.helpers import REPO, clean_env


def read_some(fd: int, seconds: float) -> bytes:
    out, deadline = b"", time.monotonic() + seconds
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                out += os.read(fd, 65536)
            except OSError:
                break
    return out


@pytest.mark.slow
def test_serve_tui_serves_shows_the_view_and_stops_on_q(smollm2, tmp_path):
    port, log = free_port(), tmp_path / "requests.log"
    leader, follower = pty.openpty()
    env = clean_env() | {"TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
    proc = subprocess.Popen([sys.executable, "-m", "mlxctl", "serve", "-m", str(smollm2.path), "--port", str(port),
                             "--served-model-name", "smollm2-135m", "--tui", "--log-file", str(log),
                             "--drain-grace", "1"],
                            cwd=REPO, env=env, stdin=follower, stdout=follower, stderr=follower)
    os.close(follower)
    try:
        url, screen, deadline = f"http://127.0.0.1:{port}", b"", time.monotonic() + 120
        while time.monotonic() < deadline:
            screen += read_some(leader, 0.5)
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
        r = httpx.post(f"{url}/v1/chat/completions", timeout=120, json={
            "model": "smollm2-135m", "max_tokens": 4, "messages": [{"role": "user", "content": "Hi"}]})
        assert r.status_code == 200
        deadline = time.monotonic() + 60  # a backstop: the view is read until it shows the model
        while b"smollm2-135m" not in screen and proc.poll() is None and time.monotonic() < deadline:
            screen += read_some(leader, 0.5)
        assert b"smollm2-135m" in screen  # the view is drawn in the terminal
        os.write(leader, b"q")
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            screen += read_some(leader, 0.5)  # keep the terminal drained: a full pty would block its last redraws
        assert proc.poll() == 0, screen[-2000:]
        assert "/v1/chat/completions" in log.read_text()  # logs went to the file, not over the view
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(leader)
