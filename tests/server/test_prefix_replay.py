"""A recorded agent session replayed through the server: the prompt cache serves what repeats."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]


def replay_module():
    spec = importlib.util.spec_from_file_location("replay_agent", ROOT / "scripts" / "replay_agent.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_requests_are_the_history_before_each_assistant_turn():
    replay = replay_module()
    transcript = json.loads((ROOT / "docs" / "workloads" / "agent_transcript.json").read_text())
    sent = replay.requests_of(transcript)
    assert len(sent) == sum(m["role"] == "assistant" for m in transcript["messages"])
    assert sent[0][0] == {"role": "system", "content": transcript["system"]}
    for before, after in zip(sent, sent[1:]):  # each prompt extends the one before
        assert after[:len(before)] == before and len(after) > len(before)


@pytest.mark.slow  # a long end-to-end run: the slow step
def test_replay_serves_the_repeated_history_from_the_cache(base_url):
    replay = replay_module()
    transcript = json.loads((ROOT / "docs" / "workloads" / "agent_transcript.json").read_text())
    transcript["messages"] = transcript["messages"][:6]  # three assistant turns keep it short on a CPU
    httpx.delete(f"{base_url}/v1/cache")
    turns = replay.replay(base_url, "smollm2-135m", transcript, max_tokens=1)
    result = replay.reuse(turns)
    assert len(turns) == 3 and turns[0]["cached_tokens"] == 0
    for before, after in zip(turns, turns[1:]):
        assert after["prompt_tokens"] > before["prompt_tokens"]
        # the previous prompt is kept to its last partial block, so the next reuses all of it
        # (and, where the reply began as the transcript's, that token too), never its own last
        assert before["prompt_tokens"] <= after["cached_tokens"] < after["prompt_tokens"]
    assert result["share"] > 0.8, turns
