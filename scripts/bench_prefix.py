#!/usr/bin/env python3
"""Prefix-cache measurements with the engine in process.

  python scripts/bench_prefix.py [--model REF] [--load-format auto] [--dtype auto] [--prefix-tokens 2000] [--turns 6]

1. TTFT of a request whose first ~N tokens were seen before, against the same request cold
   (cache cleared), alternating, median of 3; and whether the greedy outputs are identical.
2. A multi-turn conversation (system prompt, then user/assistant turns, each prompt the
   whole history) replayed turn by turn: of the prompt tokens shared with the previous turn's
   prompt and answer, the share actually served from the cache.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

SYSTEM = ("You are a coding agent. Follow the repository's conventions, keep changes small, "
          "explain each step, and run the tests after every edit. ")
QUESTIONS = ["List the files you would read first.", "What does the engine do each step?",
             "Write a test for the scheduler.", "Now make it faster.", "Summarise the change.",
             "What could go wrong?", "Write the commit message.", "Any follow-ups?"]


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None)
    p.add_argument("--load-format", default="auto")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--prefix-tokens", type=int, default=2000)
    p.add_argument("--turns", type=int, default=6)
    p.add_argument("--json", action="store_true")
    return p.parse_args()


def ttft(engine, tokens, n=8):
    from mlxctl.engine.sampling import SamplingParams

    done = engine.submit(tokens, SamplingParams(temperature=0.0, max_tokens=n)).collect()
    return done.timings.ttft_s, done.token_ids, done.usage.cached_tokens


def cold_vs_warm(engine, tok, prefix_tokens: int) -> dict:
    from mlxctl.api.prompt import render_chat

    system = SYSTEM * max(1, prefix_tokens // len(tok.encode(SYSTEM)))
    prompt = render_chat(tok, [{"role": "system", "content": system}, {"role": "user", "content": QUESTIONS[0]}])
    cold, warm, same = [], [], True
    for _ in range(3):
        engine.clear_prefix_cache()
        c_t, c_ids, _ = ttft(engine, prompt)
        w_t, w_ids, cached = ttft(engine, prompt)
        cold.append(c_t), warm.append(w_t)
        same &= c_ids == w_ids
    return {"prompt_tokens": len(prompt), "cached_tokens": cached, "ttft_cold_s": statistics.median(cold),
            "ttft_warm_s": statistics.median(warm), "warm_over_cold": statistics.median(warm) / statistics.median(cold),
            "greedy_identical": same}


def conversation(engine, tok, turns: int) -> dict:
    from mlxctl.api.prompt import render_chat
    from mlxctl.engine.sampling import SamplingParams

    engine.clear_prefix_cache()
    messages, previous, shared, served = [{"role": "system", "content": SYSTEM * 8}], [], 0, 0
    for question in QUESTIONS[:turns]:
        messages.append({"role": "user", "content": question})
        prompt = render_chat(tok, messages)
        done = engine.submit(prompt, SamplingParams(temperature=0.0, max_tokens=48)).collect()
        shared += common_prefix(prompt, previous)
        served += done.usage.cached_tokens
        previous = prompt + list(done.token_ids)
        messages.append({"role": "assistant", "content": done.text})
    return {"turns": turns, "reusable_tokens": shared, "served_from_cache": served,
            "share": served / shared if shared else 0.0}


def common_prefix(a, b) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def main() -> int:
    args = parse()
    from mlxctl.engine.engine import Engine
    from mlxctl.generation import model_loader

    loaded = model_loader(args.model, args.dtype, None, args.load_format)()
    with Engine(lambda: loaded) as engine:
        result = {"model": loaded.name, "block_size": engine.prefix.cache.block_size,
                  "cold_vs_warm": cold_vs_warm(engine, loaded.tokenizer, args.prefix_tokens),
                  "conversation": conversation(engine, loaded.tokenizer, args.turns)}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
