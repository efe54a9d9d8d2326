#!/usr/bin/env python3
"""Where the time to the first token goes for a prompt served from the prefix cache, against
the same prompt cold.

  python scripts/probe_prefix.py [--model REF] [--load-format dummy] [--dtype native]
         [--prefix-tokens 2000] [--sync]

Wraps the engine's phases with timers (this script only; the product is untouched): the cache
lookup and rebuild (``attach``), prefill, remembering the prompt's blocks, joining the batch,
and whole steps; prints milliseconds per phase for a cold request (cache cleared) and a cached
one, median of 3. ``--sync`` waits for the device after each phase, so device time is charged
to the phase that queued it (slower overall, but attributable).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict

from bench_engine import add_model_args, loaded_model


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p, formats=None)
    p.add_argument("--prefix-tokens", type=int, default=2000)
    p.add_argument("--sync", action="store_true")
    args = p.parse_args()

    import mlx.core as mx

    from mlxctl.api.prompt import render_chat
    from mlxctl.engine.engine import Engine
    from mlxctl.engine.sampling import SamplingParams

    loaded = loaded_model(args)
    engine = Engine(lambda: loaded).start()
    table: dict[str, float] = defaultdict(float)

    def timed(name, fn):
        def wrapper(*a, **kw):
            t0 = time.perf_counter()
            try:
                out = fn(*a, **kw)
                if args.sync:
                    mx.synchronize()
                return out
            finally:
                table[name] += time.perf_counter() - t0
        return wrapper

    prefix, runner = engine.prefix, engine.runner
    prefix.attach = timed("lookup + rebuild (attach)", prefix.attach)
    prefix._cache_from = timed("  of which rebuild", prefix._cache_from)
    prefix.remember_tokens = timed("remember blocks", prefix.remember_tokens)
    runner.prefill = timed("prefill", runner.prefill)
    runner.prefill_group = timed("prefill (group)", runner.prefill_group)
    runner.decode = timed("decode", runner.decode)
    engine._emit = timed("emit", engine._emit)
    engine.step = timed("whole steps", engine.step)

    text = ("You are a coding agent. Follow the repository's conventions, keep changes small, explain "
            "each step, and run the tests after every edit. ")
    n = max(1, args.prefix_tokens // len(loaded.tokenizer.encode(text)))
    prompt = render_chat(loaded.tokenizer, [{"role": "system", "content": text * n},
                                            {"role": "user", "content": "List the files you would read first."}])
    params = SamplingParams(temperature=0.0, max_tokens=1)
    runs: dict[str, list[dict]] = {"cold": [], "cached": []}
    engine.submit(prompt, params).collect()  # warm-up of every shape
    engine.submit(prompt, params).collect()
    for _ in range(3):
        for kind in ("cold", "cached"):
            if kind == "cold":
                engine.clear_prefix_cache()
            table.clear()
            done = engine.submit(prompt, params).collect()
            runs[kind].append({"TTFT": done.timings.ttft_s, "cached tokens": done.usage.cached_tokens, **table})
    engine.shutdown()
    print(f"prompt {len(prompt)} tokens, {loaded.name} on {mx.default_device()}, sync={args.sync}, ms (median of 3):")
    names = sorted({k for r in runs["cold"] + runs["cached"] for k in r if k not in ("TTFT", "cached tokens")})
    for kind, rows in runs.items():
        ttft = statistics.median(r["TTFT"] for r in rows) * 1000
        cached = rows[-1]["cached tokens"]
        phases = ", ".join(f"{k} {statistics.median(r.get(k, 0.0) for r in rows) * 1000:.2f}" for k in names)
        print(f"{kind}: TTFT {ttft:.2f} (cached tokens {cached}) | {phases}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
