"""16 concurrent streams: /metrics and /v1/status agree with what was sent and received.

The output-equality half of this case (each stream equals its solo greedy output) is
test_openai_concurrency.py; this is the accounting half, with the same questions.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Self

import httpx
import openai
import pytest

from tests.server.infra import idle, wait_until
from tests.server.test_infra_metrics import samples
from tests.server.test_openai_concurrency import MODEL, QUESTIONS

STREAMS = 16
FINISHED = ("stop", "length")


def streamed_usage(client: openai.OpenAI, question: str):
    """Stream one greedy answer; return its usage (the last chunk's, with include_usage)."""
    chunks = list(client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": question}], temperature=0, max_tokens=8, stream=True,
        stream_options={"include_usage": True}))
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return chunks[-1].usage


class StatusWatch:
    """Polls /v1/status on a thread; keeps the most generations and engine requests seen at once."""

    def __init__(self, url: str):
        self.url, self.stop = url, threading.Event()
        self.most_generations = self.most_requests = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(timeout=60) as http:
            while not self.stop.is_set():
                status = http.get(f"{self.url}/v1/status").json()
                self.most_generations = max(self.most_generations, status["http"]["generations"])
                engine = status["engine"]
                self.most_requests = max(self.most_requests, engine["num_running"] + engine["num_waiting"])
                self.stop.wait(0.05)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(60)


@pytest.mark.slow  # over 6 s: the slow step (keeps the default suite near 15 minutes)
def test_sixteen_streams_are_counted_exactly_and_leave_the_server_idle(base_url):
    client = openai.OpenAI(base_url=base_url + "/v1", api_key="x", max_retries=0)
    questions = (QUESTIONS * 2)[:STREAMS]
    assert len(questions) == STREAMS
    before = samples(httpx.get(f"{base_url}/metrics").text)

    def delta(name: str, **labels) -> float:
        now = samples(httpx.get(f"{base_url}/metrics").text)
        key = (name, tuple(sorted(labels.items())))
        return now.get(key, 0) - before.get(key, 0)

    with StatusWatch(base_url) as watch, ThreadPoolExecutor(STREAMS) as pool:
        usages = list(pool.map(lambda q: streamed_usage(client, q), questions))

    # a view records its metrics as its generation closes, just after the last bytes went out
    assert wait_until(lambda: delta("mlxctl:e2e_request_latency_seconds_count") >= STREAMS)
    completion = sum(u.completion_tokens for u in usages)
    assert sum(delta("mlxctl:request_success_total", finished_reason=r) for r in FINISHED) == STREAMS
    assert delta("mlxctl:request_success_total", finished_reason="abort") == 0
    assert delta("mlxctl:request_success_total", finished_reason="error") == 0
    assert delta("mlxctl:generation_tokens_total") == completion
    assert delta("mlxctl:prompt_tokens_total") == sum(u.prompt_tokens for u in usages)
    assert delta("mlxctl:e2e_request_latency_seconds_count") == STREAMS
    assert delta("mlxctl:request_queue_time_seconds_count") == STREAMS
    assert delta("mlxctl:time_to_first_token_seconds_count") == sum(1 for u in usages if u.completion_tokens)
    assert delta("mlxctl:inter_token_latency_seconds_count") == sum(max(u.completion_tokens - 1, 0) for u in usages)

    assert 1 < watch.most_generations <= STREAMS  # they really ran side by side
    assert 1 < watch.most_requests <= STREAMS
    assert wait_until(lambda: idle(base_url))
    status = httpx.get(f"{base_url}/v1/status").json()
    assert status["http"] == {"in_flight": 1, "generations": 0}  # in flight: this status request
    assert status["engine"]["num_running"] == status["engine"]["num_waiting"] == 0
    after = samples(httpx.get(f"{base_url}/metrics").text)
    assert after[("mlxctl:num_requests_running", ())] == 0
    assert after[("mlxctl:num_requests_waiting", ())] == 0
