"""The prefix cache seen through the APIs: cached token counts, /v1/cache, /metrics."""

from __future__ import annotations

import anthropic
import httpx
import openai

SYSTEM = "You are a helpful assistant. " * 30  # about 180 tokens: several 64-token blocks


def ask(client, question: str):
    return client.chat.completions.create(
        model="smollm2-135m", max_tokens=4, temperature=0,
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}])


def test_openai_reports_cached_tokens_and_the_same_answer(base_url):
    httpx.delete(f"{base_url}/v1/cache")
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="x")
    cold = ask(client, "What is the capital of France?")
    warm = ask(client, "What is the capital of France?")
    assert cold.usage.prompt_tokens_details.cached_tokens == 0
    assert warm.usage.prompt_tokens_details.cached_tokens >= 128
    assert warm.choices[0].message.content == cold.choices[0].message.content
    other = ask(client, "Name a colour.")  # same system prompt, new question
    assert other.usage.prompt_tokens_details.cached_tokens >= 128


def test_anthropic_reports_cache_reads(base_url):
    httpx.delete(f"{base_url}/v1/cache")
    client = anthropic.Anthropic(base_url=base_url, api_key="x")
    kw = dict(model="smollm2-135m", max_tokens=4, system=SYSTEM,
              messages=[{"role": "user", "content": "What is the capital of France?"}])
    cold, warm = client.messages.create(**kw), client.messages.create(**kw)
    assert cold.usage.cache_read_input_tokens == 0
    assert warm.usage.cache_read_input_tokens >= 128
    assert warm.usage.input_tokens + warm.usage.cache_read_input_tokens == cold.usage.input_tokens


def test_cache_stats_clear_and_metrics(base_url):
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="x")
    ask(client, "Hi")
    stats = httpx.get(f"{base_url}/v1/cache/stats").json()
    assert stats["enabled"] and stats["blocks"] > 0 and stats["bytes"] > 0
    metrics = httpx.get(f"{base_url}/metrics").text
    assert "mlxctl:prefix_cache_queries_total" in metrics and "mlxctl:prefix_cache_bytes" in metrics
    cleared = httpx.delete(f"{base_url}/v1/cache").json()
    assert cleared["cleared_blocks"] == stats["blocks"] and cleared["bytes"] == 0
