#!/usr/bin/env python3
"""Prefix-cache measurements with the engine in process.

  python scripts/bench_prefix.py [--model REF] [--load-format auto] [--dtype auto] [--prefix-tokens 2000] [--turns 6]

1. TTFT of a request whose first ~N tokens were seen before, against the same request cold
   (cache cleared), alternating, median of 3; and whether the greedy outputs are identical.
3. (--disk) The same long prompt across a restart: cold in one engine with a --cache-dir, then
   the first request of a fresh engine on that directory (blocks read back from disk), then
   again from memory; median of 3 with fresh directories; greedy identical or not.
2. A multi-turn conversation (system prompt, then user/assistant turns, each prompt the
   whole history) replayed turn by turn: of the prompt tokens shared with the previous turn's
   prompt and answer, the share actually served from the cache.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

from bench_engine import add_model_args, loaded_model

SYSTEM = ("You are a coding agent. Follow the repository's conventions, keep changes small, "
          "explain each step, and run the tests after every edit. ")
QUESTIONS = ["List the files you would read first.", "What does the engine do each step?",
             "Write a test for the scheduler.", "Now make it faster.", "Summarise the change.",
             "What could go wrong?", "Write the commit message.", "Any follow-ups?"]


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p, formats=None)
    p.add_argument("--prefix-tokens", type=int, default=2000)
    p.add_argument("--turns", type=int, default=6)
    p.add_argument("--json", action="store_true")
    p.add_argument("--disk", action="store_true", help="also measure reuse across a restart from a disk tier")
    p.add_argument("--bits", type=int, default=0, help="quantise cached blocks (8 or 4) in every part")
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
        shared += _shared(prompt, previous)
        served += done.usage.cached_tokens
        previous = prompt + list(done.token_ids)
        messages.append({"role": "assistant", "content": done.text})
    return {"turns": turns, "reusable_tokens": shared, "served_from_cache": served,
            "share": served / shared if shared else 0.0}


def disk_restart(loaded, prefix_tokens: int, bits: int) -> dict:
    import tempfile

    from mlxctl.api.prompt import render_chat
    from mlxctl.engine.engine import Engine, EngineConfig
    from mlxctl.engine.prefix_config import PrefixConfig

    tok = loaded.tokenizer
    system = SYSTEM * max(1, prefix_tokens // len(tok.encode(SYSTEM)))
    prompt = render_chat(tok, [{"role": "system", "content": system}, {"role": "user", "content": QUESTIONS[0]}])
    cold, disk, memory, same, cached = [], [], [], True, 0
    for _ in range(3):
        with tempfile.TemporaryDirectory() as tmp:
            cfg = EngineConfig(prefix=PrefixConfig(cache_dir=tmp, bits=bits))
            with Engine(lambda: loaded, cfg) as first:
                c_t, c_ids, _ = ttft(first, prompt)
            with Engine(lambda: loaded, cfg) as second:
                d_t, d_ids, cached = ttft(second, prompt)
                m_t, _, _ = ttft(second, prompt)
        cold.append(c_t), disk.append(d_t), memory.append(m_t)
        same &= c_ids == d_ids
    med = statistics.median
    return {"prompt_tokens": len(prompt), "cached_tokens": cached, "ttft_cold_s": med(cold),
            "ttft_after_restart_from_disk_s": med(disk), "ttft_from_memory_s": med(memory),
            "disk_over_cold": med(disk) / med(cold), "greedy_identical_after_restart": same}


def _shared(a, b) -> int:
    from mlxctl.engine.kv.pool import shared_prefix

    return shared_prefix(a, b)


def main() -> int:
    args = parse()
    from mlxctl.engine.engine import Engine

    from mlxctl.engine.engine import EngineConfig
    from mlxctl.engine.prefix_config import PrefixConfig

    loaded = loaded_model(args, quiet=True)
    with Engine(lambda: loaded, EngineConfig(prefix=PrefixConfig(bits=args.bits))) as engine:
        result = {"model": loaded.name, "block_size": engine.prefix.cache.block_size, "bits": args.bits,
                  "cold_vs_warm": cold_vs_warm(engine, loaded.tokenizer, args.prefix_tokens),
                  "conversation": conversation(engine, loaded.tokenizer, args.turns)}
    if args.disk:
        result["disk_restart"] = disk_restart(loaded, args.prefix_tokens, args.bits)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
