#!/usr/bin/env python3
"""Replay a recorded agent transcript through a running server and report prompt-cache reuse.

  python scripts/replay_agent.py --url http://127.0.0.1:8080 [--model NAME]
         [--transcript docs/workloads/agent_transcript.json] [--max-tokens 1] [--json]

One chat-completions request (with the transcript's tools) per assistant turn of the
recording, each prompt the whole history up to that turn, as an agent sends it; the recorded
assistant turns (tool calls included) and tool results are what goes back, so every run sends
the same prompts. For each turn it reads ``usage.prompt_tokens`` and
``usage.prompt_tokens_details.cached_tokens``. Each prompt extends the previous one, so the
previous prompt's tokens are what the cache could serve; the share reported is the cached
tokens over that (block rounding and any miss count against it). Clear the server's cache
first (``DELETE /v1/cache``) for a cold start; the script does it unless --keep-cache.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

DEFAULT = Path(__file__).resolve().parent.parent / "docs" / "workloads" / "agent_transcript.json"


def requests_of(transcript: dict) -> list[list[dict]]:
    """The message lists an agent sends: the history before each recorded assistant turn."""
    history = [{"role": "system", "content": transcript["system"]}] if transcript.get("system") else []
    out = []
    for message in transcript["messages"]:
        if message["role"] == "assistant":
            out.append(list(history))
        history.append(message)
    return out


def reuse(turns: list[dict]) -> dict:
    """Cached tokens over what the previous prompt made reusable, turn 2 onwards."""
    reusable = sum(t["prompt_tokens"] for t in turns[:-1])
    cached = sum(t["cached_tokens"] for t in turns[1:])
    return {"reusable_tokens": reusable, "cached_tokens": cached,
            "share": cached / reusable if reusable else 0.0,
            "prompt_tokens": sum(t["prompt_tokens"] for t in turns)}


def replay(url: str, model: str, transcript: dict, max_tokens: int) -> list[dict]:
    import openai

    client = openai.OpenAI(base_url=f"{url.rstrip('/')}/v1", api_key="replay", max_retries=0, timeout=600)
    turns = []
    for i, messages in enumerate(requests_of(transcript)):
        t0 = time.perf_counter()
        done = client.chat.completions.create(model=model, messages=messages, tools=transcript.get("tools"),
                                              max_tokens=max_tokens, temperature=0)
        details = done.usage.prompt_tokens_details
        turns.append({"turn": i + 1, "prompt_tokens": done.usage.prompt_tokens,
                      "cached_tokens": (details.cached_tokens or 0) if details else 0,
                      "seconds": round(time.perf_counter() - t0, 3)})
    return turns


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--model", default=None, help="the served model's name (default: the first in /v1/models)")
    p.add_argument("--transcript", type=Path, default=DEFAULT)
    p.add_argument("--max-tokens", type=int, default=1, help="tokens generated per turn (reuse is about prompts)")
    p.add_argument("--keep-cache", action="store_true", help="do not clear the server's prefix cache first")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    import httpx

    base = args.url.rstrip("/")
    model = args.model or httpx.get(f"{base}/v1/models").json()["data"][0]["id"]
    if not args.keep_cache:
        httpx.delete(f"{base}/v1/cache")
    turns = replay(base, model, json.loads(args.transcript.read_text()), args.max_tokens)
    result = {"url": base, "model": model, "transcript": str(args.transcript), "turns": turns, **reuse(turns)}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for t in turns:
            print(f"turn {t['turn']}: prompt {t['prompt_tokens']} tokens, cached {t['cached_tokens']}, {t['seconds']} s")
        print(f"reuse: {result['cached_tokens']} of {result['reusable_tokens']} reusable prompt tokens served "
              f"from the cache ({100 * result['share']:.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
