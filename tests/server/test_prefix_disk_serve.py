"""`serve --cache-dir --warm-prompts` as users run it: warm at start, reuse after a restart."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import httpx
import pytest

from mlxctl.server.runner import free_port
from tests.cli.helpers import REPO, clean_env
from tests.server.infra import MODEL, wait_until
from tests.server.test_infra_serve_cli import _health, read_url

SYSTEM = ("You are a careful assistant for a library. Answer questions about opening hours, loans, "
          "fines and events. Opening hours: Monday to Friday 9 to 18, Saturday 10 to 14. ") * 4


def start(smollm2, *extra: str) -> tuple[subprocess.Popen, str]:
    args = [sys.executable, "-m", "mlxctl", "serve", "-m", str(smollm2.path), "--port", str(free_port()),
            "--served-model-name", MODEL, "--drain-grace", "1", *extra]
    proc = subprocess.Popen(args, cwd=REPO, env=clean_env(), stderr=subprocess.PIPE, text=True)
    return proc, read_url(proc)


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 0


def ask(url: str, question: str) -> dict:
    body = {"model": MODEL, "temperature": 0, "max_tokens": 12,
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]}
    r = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def cached(answer: dict) -> int:
    return answer["usage"]["prompt_tokens_details"]["cached_tokens"]


@pytest.mark.slow  # a long end-to-end run: the slow step
def test_warm_prompts_then_a_restart_reuses_the_disk_tier(smollm2, tmp_path):
    warm = tmp_path / "warm.jsonl"
    warm.write_text(json.dumps(SYSTEM) + "\n" + json.dumps({"prompt": "Once upon a time"}) + "\n")
    cache_dir = str(tmp_path / "kv")
    proc, url = start(smollm2, "--cache-dir", cache_dir, "--warm-prompts", str(warm))
    try:
        assert wait_until(lambda: _health(url) == 200, timeout=120, interval=0.25)
        assert wait_until(lambda: (httpx.get(f"{url}/v1/status").json()["warm_prompts"] or {}).get("done") == 2,
                          timeout=120, interval=0.25)
        status = httpx.get(f"{url}/v1/status").json()["warm_prompts"]
        assert status["failed"] == 0 and status["prompt_tokens"] > 100
        first = ask(url, "When do you open on Saturday?")
        assert cached(first) >= 64  # the warmed system prompt's blocks
    finally:
        stop(proc)
    blocks = list((tmp_path / "kv" / "blocks").iterdir())
    assert blocks and (tmp_path / "kv" / "index.sqlite").exists()

    proc, url = start(smollm2, "--cache-dir", cache_dir)
    try:
        assert wait_until(lambda: _health(url) == 200, timeout=120, interval=0.25)
        again = ask(url, "When do you open on Saturday?")
        metrics = httpx.get(f"{url}/metrics").text
        stats = httpx.get(f"{url}/v1/cache/stats").json()
        cleared = httpx.delete(f"{url}/v1/cache", params={"disk": "true"}).json()
        bad = httpx.delete(f"{url}/v1/cache", params={"disk": "maybe"})
    finally:
        stop(proc)
    assert again["choices"][0]["message"]["content"] == first["choices"][0]["message"]["content"]
    assert cached(again) >= cached(first)  # the whole previous conversation came back from disk
    assert stats["disk_blocks"] > 0 and stats["promoted_blocks"] > 0
    assert "mlxctl:prefix_cache_disk_bytes" in metrics and "mlxctl:prefix_cache_disk_hits_total" in metrics
    assert cleared["disk_blocks"] == 0
    assert bad.status_code == 400 and "disk" in bad.json()["error"]["message"]


@pytest.mark.parametrize("content, message", [
    ("", "has no prompts"),
    ("[1, 2]", "expected a non-empty string"),
    ('{"messages": [], "x": 1}\n', "unknown key 'x'"),
    ("{not json\n", "not valid JSON"),
])
def test_a_bad_warm_prompts_file_is_a_one_line_error(tmp_path, content, message):
    warm = tmp_path / "warm.json"
    warm.write_text(content)
    r = subprocess.run([sys.executable, "-m", "mlxctl", "serve", "--warm-prompts", str(warm)], cwd=REPO,
                       env=clean_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 4 and message in r.stderr and "Traceback" not in r.stderr
