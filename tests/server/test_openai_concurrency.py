"""Concurrent and abandoned OpenAI streams against the real engine."""

from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest

from tests.server.infra import idle, wait_until
from tests.server.test_infra_drain import aborted

MODEL = "smollm2-135m"
QUESTIONS = ["What is the capital of France?", "Name a primary color.", "What is 2 + 2?", "Say hello.",
             "What do bees make?", "Name a planet.", "What is ice?", "Who wrote Hamlet?"]


def ask(client, question, stream):
    args = {"model": MODEL, "messages": [{"role": "user", "content": question}], "temperature": 0, "max_tokens": 8}
    if not stream:
        return client.chat.completions.create(**args).choices[0].message.content
    chunks = client.chat.completions.create(stream=True, **args)
    return "".join(c.choices[0].delta.content or "" for c in chunks)


@pytest.mark.slow  # a long end-to-end run: the slow step
def test_sixteen_concurrent_streams_match_solo(base_url):
    client = openai.OpenAI(base_url=base_url + "/v1", api_key="x")
    solo = {q: ask(client, q, stream=False) for q in QUESTIONS}
    questions = QUESTIONS * 2
    with ThreadPoolExecutor(len(questions)) as pool:
        together = list(pool.map(lambda q: ask(client, q, stream=True), questions))
    assert together == [solo[q] for q in questions]


def test_disconnect_aborts_the_request(base_url, engine):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Tell a long story."}],
            "max_tokens": 2000, "stream": True, "n": 2}
    with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=body, timeout=60) as r:
        lines = r.iter_lines()
        while "content" not in next(lines):
            pass
    assert wait_until(lambda: idle(base_url)), httpx.get(f"{base_url}/v1/status").json()
    assert engine.stats()["batch_size"] == 0
    assert wait_until(lambda: aborted(base_url) == 2)  # both choices abandoned, not finished
