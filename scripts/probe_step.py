#!/usr/bin/env python3
"""Where a single-stream decode step's time goes: the engine against a bare pipelined loop.

  python scripts/probe_step.py [--model REF] [--load-format dummy] [--dtype native] [--tokens 256]

Wraps the engine's own step phases with timers (this script only; the product is untouched)
and runs one greedy request; then runs the same model in a bare `generate_step`-style loop,
timing graph building and waiting separately. Prints mean milliseconds per step.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict

from bench_engine import add_model_args, loaded_model


def timed(table, name, fn):
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            table[name] += time.perf_counter() - t0
    return wrapper


def probe_engine(loaded, prompt, n) -> dict:
    from mlxctl.engine.engine import Engine
    from mlxctl.engine.sampling import SamplingParams

    engine = Engine(lambda: loaded).start()
    engine.submit(prompt, SamplingParams(temperature=0.0, max_tokens=16, ignore_eos=True)).collect()
    table = defaultdict(float)
    engine.runner.decode = timed(table, "decode (graph + async_eval)", engine.runner.decode)
    engine._emit = timed(table, "emit (wait + detokenize + put)", engine._emit)
    engine.scheduler.schedule = timed(table, "schedule", engine.scheduler.schedule)
    engine.step = timed(table, "whole step", engine.step)
    t0 = time.perf_counter()
    done = engine.submit(prompt, SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True)).collect()
    wall = time.perf_counter() - t0
    engine.shutdown()
    return {k: v / n * 1000 for k, v in table.items()} | {"tok/s": done.timings.decode_tps, "wall tok/s": n / wall}


def probe_bare(loaded, prompt, n) -> dict:
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    model, stream = loaded.model, mx.new_stream(mx.default_device())
    table = defaultdict(float)
    with mx.stream(stream):
        cache = make_prompt_cache(model)
        y = mx.argmax(model(mx.array(prompt)[None], cache=cache)[:, -1, :], axis=-1)
        mx.eval(y)
        t_start = time.perf_counter()
        for _ in range(n):
            t0 = time.perf_counter()
            nxt = mx.argmax(model(y[:, None], cache=cache)[:, -1, :], axis=-1)
            mx.async_eval(nxt)
            t1 = time.perf_counter()
            y.item()
            t2 = time.perf_counter()
            table["graph + async_eval"] += t1 - t0
            table["wait (item)"] += t2 - t1
            y = nxt
        total = time.perf_counter() - t_start
    return {k: v / n * 1000 for k, v in table.items()} | {"whole step": total / n * 1000, "tok/s": n / total}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p, formats=None)
    p.add_argument("--tokens", type=int, default=256)
    args = p.parse_args()
    loaded = loaded_model(args, quiet=True)
    prompt = list(range(100, 612))
    for name, probe in (("bare loop", probe_bare), ("engine", probe_engine), ("bare loop", probe_bare), ("engine", probe_engine)):
        result = probe(loaded, prompt, args.tokens)
        print(name + ": " + ", ".join(f"{k} {v:.3f}" for k, v in result.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
