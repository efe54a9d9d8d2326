#!/usr/bin/env python3
"""What a prompt group holding prefix-cache hits costs to prefill: its rows' caches merged from
their stackings (``batch.merged_hits``, one concatenation a side) against layer by layer
(``BatchKVCache.merge``: two writes a row and layer), and a fresh group of the same prompts.

  python scripts/probe_tails.py --model REF [--load-format dummy] [--dtype native]
         [--rows 8] [--prompt-tokens 542] [--hit 27] [--reps 7]

Each rep rebuilds the rows' hits (every layer's keys and values for ``--hit`` tokens, stacked, as
``PrefixReuse`` rebuilds them from blocks), then times ``ModelRunner.prefill_group`` up to its
first tokens evaluated, each way in turn (interleaved). Prints the median milliseconds of each
way and the rows' greedy first tokens, which must agree.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_engine import add_model_args, loaded_model  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_args(p, required=True)
    p.add_argument("--rows", type=int, default=8)
    p.add_argument("--prompt-tokens", type=int, default=542)
    p.add_argument("--hit", type=int, default=27)
    p.add_argument("--reps", type=int, default=7)
    args = p.parse_args()
    if not 0 < args.hit < args.prompt_tokens - 1 or args.rows < 1 or args.reps < 1:
        p.error("--hit must be at least 1 and below --prompt-tokens - 1; --rows and --reps at least 1")
    import random

    import mlx.core as mx

    from mlxctl.engine import runner as runner_mod
    from mlxctl.engine.batch import HitCache, StackedRow
    from mlxctl.engine.runner import ModelRunner
    from mlxctl.engine.sampling import SamplingParams, TokenSampler

    loaded = loaded_model(args)
    runner = ModelRunner(loaded.model)
    rng = random.Random(0)
    head = [rng.randrange(100, 30000) for _ in range(args.hit)]
    prompts = [head + [rng.randrange(100, 30000) for _ in range(args.prompt_tokens - args.hit)]
               for _ in range(args.rows)]
    vocab = loaded.model.args.vocab_size

    def hit_cache() -> HitCache:  # the shared opening's KV, stacked like blocks rebuilt from the cache
        cache = runner.new_cache()
        loaded.model(mx.array([head]), cache=cache)
        keys = mx.stack([c.keys[..., : args.hit, :] for c in cache])
        values = mx.stack([c.values[..., : args.hit, :] for c in cache])
        mx.eval(keys, values)
        for i, c in enumerate(cache):
            c.keys, c.values, c.offset = keys[i], values[i], args.hit
        return HitCache(cache, StackedRow(keys, values))

    def requests(hits: bool) -> list[SimpleNamespace]:
        return [SimpleNamespace(prefill_tokens=t, prefill_len=len(t), num_prefilled=args.hit if hits else 0,
                                cache=hit_cache() if hits else None, constraint=None,
                                sampler=TokenSampler(SamplingParams(temperature=0.0), vocab, t))
                for t in prompts]

    real = runner_mod.merged_hits
    ways = {"stackings": (True, real), "layer by layer": (True, lambda caches: None), "fresh": (False, real)}
    times: dict[str, list[float]] = {k: [] for k in ways}
    firsts: dict[str, list[int]] = {}
    for rep in range(args.reps + 1):  # the first round builds kernels and is not counted
        for name, (hits, merge) in ways.items():
            reqs = requests(hits)
            runner_mod.merged_hits = merge
            t0 = time.perf_counter()
            _, first, _ = runner.prefill_group(reqs)
            tokens = first.tokens.tolist()
            if rep:
                times[name].append((time.perf_counter() - t0) * 1000)
            firsts[name] = tokens
    runner_mod.merged_hits = real
    for name, t in times.items():
        print(f"{name:>15}: median {statistics.median(t):8.2f} ms  reps {[round(x, 1) for x in t]}")
    print("first tokens agree:", len({tuple(v) for v in firsts.values()}) == 1, firsts["stackings"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
