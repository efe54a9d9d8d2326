"""The official SDKs against `python -m mlxctl serve` as a user starts it, then Ctrl-C.

One process for the whole module: the default model (no ``-m``: the catalog's SmolLM2, found in
the test cache through $MLXCTL_HOME), a free loopback port, default flags otherwise but for a
drain grace far longer than the test waits. The clients change nothing but the base URL. The
last test sends SIGINT, as Ctrl-C does, and checks that the server stops with status 0 without
waiting out the grace, as it has nothing to drain (docs: "SIGTERM or Ctrl-C drains ... and exits
0"), and prints no traceback.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading

import anthropic
import httpx
import openai
import pytest

from mlxctl.server.runner import free_port
from tests.cli.helpers import REPO, clean_env
from tests.server.infra import MODEL, wait_until

GRACE_S = 900  # a drain the idle server should not wait for: it has nothing to drain
STOP_WITHIN_S = 120  # a backstop, far inside the grace: stopping is not timed


class Served:
    """A running `mlxctl serve`, its URL, and everything it printed (read on threads, so that
    a full pipe never blocks it)."""

    def __init__(self, proc: subprocess.Popen, url: str):
        self.proc, self.url = proc, url
        self.out: list[str] = []
        self.err: list[str] = []
        self.readers = [threading.Thread(target=self._drain, args=(s, lines), daemon=True)
                        for s, lines in ((proc.stdout, self.out), (proc.stderr, self.err))]

    def _drain(self, stream, lines: list[str]) -> None:
        lines.extend(stream)  # line by line, as they come

    def printed(self) -> str:
        for reader in self.readers:
            reader.join(10)
        return "".join(self.out) + "".join(self.err)


def _health(url: str) -> int:
    try:
        return httpx.get(f"{url}/health", timeout=5).status_code
    except httpx.TransportError:
        return 0


@pytest.fixture(scope="module")
def served(smollm2, model_home):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "mlxctl", "serve", "--port", str(port),
                             "--drain-grace", str(GRACE_S)], cwd=REPO,
                            env=clean_env({"MLXCTL_HOME": str(model_home), "MLXCTL_OFFLINE": "1"}),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    server = Served(proc, f"http://127.0.0.1:{port}")
    for reader in server.readers:
        reader.start()
    try:
        up = wait_until(lambda: proc.poll() is not None or _health(server.url) == 200, timeout=120, interval=0.25)
        assert up and proc.poll() is None, f"serve did not come up ({proc.poll()}):\n{server.printed()}"
        yield server
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.fixture
def oai(served) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{served.url}/v1", api_key="unused", max_retries=0)


def test_the_default_model_is_listed(oai):
    assert [m.id for m in oai.models.list()] == [MODEL]


def test_openai_streamed_chat(oai):
    chunks = list(oai.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "What is the capital of France?"}], max_tokens=8,
        temperature=0, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert text.strip() and finishes in (["stop"], ["length"])
    assert chunks[-1].choices == [] and 1 <= chunks[-1].usage.completion_tokens <= 8
    assert all(c.model == MODEL and c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1


def test_openai_completion(oai):
    resp = oai.completions.create(model=MODEL, prompt="The capital of France is", max_tokens=5, temperature=0)
    assert resp.object == "text_completion" and resp.model == MODEL
    assert resp.choices[0].text and resp.choices[0].finish_reason == "length"
    assert resp.usage.completion_tokens == 5 and resp.usage.prompt_tokens > 0


def test_anthropic_streamed_message(served):
    client = anthropic.Anthropic(base_url=served.url, api_key="unused", max_retries=0)
    messages = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
    with client.messages.stream(model=MODEL, messages=messages, max_tokens=12, extra_body={"temperature": 0}) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert text.strip() and final.content[0].text == text
    assert final.role == "assistant" and final.model == MODEL
    assert final.stop_reason in ("end_turn", "max_tokens")
    assert final.usage.input_tokens > 0 and 1 <= final.usage.output_tokens <= 12


def test_ctrl_c_stops_promptly_and_cleanly(served):
    """Last in the module: it ends the shared process."""
    proc = served.proc
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    try:
        status = proc.wait(STOP_WITHIN_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"serve still running {STOP_WITHIN_S} s after Ctrl-C (waiting out its {GRACE_S} s "
                    f"grace with nothing to drain?):\n{served.printed()}")
    printed = served.printed()
    assert status == 0, printed
    assert not re.search(r"traceback|exception|error", printed, re.IGNORECASE), printed
    assert f"listening on {served.url}" in printed
    assert _health(served.url) == 0  # the port is closed
