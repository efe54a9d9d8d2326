"""The engine on the real SmolLM2: batching is invisible in greedy outputs."""

from __future__ import annotations

import pytest

from mlxctl.api.prompt import chat_messages, render_chat
from mlxctl.engine.sampling import SamplingParams

QUESTIONS = [
    "What is the capital of France?",
    "Name three colours.",
    "What is 2 + 2?",
    "Write a haiku about rain.",
    "Who wrote Hamlet?",
    "Say hello in Spanish.",
    "What is the largest planet?",
    "Give me a synonym for happy.",
]


@pytest.mark.slow  # 15 s: the slow step (default step over 15 min; batching is covered on tiny models)
def test_eight_concurrent_greedy_requests_match_alone(smollm2_engine):
    engine = smollm2_engine
    tok = engine.model.tokenizer
    prompts = [render_chat(tok, chat_messages(q)) for q in QUESTIONS]
    params = SamplingParams(temperature=0.0, max_tokens=24)
    alone = [engine.submit(p, params).collect() for p in prompts]
    streams = [engine.submit(p, params) for p in prompts]
    together = [s.collect() for s in streams]
    assert [c.token_ids for c in together] == [c.token_ids for c in alone]
    assert "Paris" in alone[0].text


def test_utf8_is_never_split(smollm2_engine):
    engine = smollm2_engine
    prompt = render_chat(engine.model.tokenizer, chat_messages("Write the word café and an emoji 🎉 three times."))
    events = list(engine.submit(prompt, SamplingParams(temperature=0.0, max_tokens=40)))
    assert all("\ufffd" not in getattr(e, "text", "") for e in events)
