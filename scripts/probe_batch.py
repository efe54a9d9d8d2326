#!/usr/bin/env python3
"""Where the time of a batch of concurrent requests goes: the engine against mlx-lm's
`BatchGenerator`, phase by phase, on the same loaded model.

  python scripts/probe_batch.py [--model REF] [--load-format dummy] [--dtype native]
         [--concurrency 64] [--prompt-tokens 512] [--max-tokens 128] [--reps 2]

Wraps the phases of each with timers (this script only; the product is untouched): for the
engine the scheduler, the decode step (graph + kernel launch), the wait for the previous
step's tokens, emitting them (detokenize, stop checks, events), the prompt work, joining and
housekeeping; for `BatchGenerator` its decode step (`GenerationBatch.next`, which waits for
the previous tokens inside), its prompt passes and its joins. Each shape runs once unmeasured
(kernel compilation), then REPS interleaved rounds, each on new random prompts (the same for
both) so the engine's prefix cache never serves them. Prints, per round, the wall time, the
steps, the output tok/s and the seconds in each phase, as JSON lines.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import defaultdict

from bench_engine import add_model_args, loaded_model


def timed(table, name, fn):
    """probe_step.timed (seconds in ``fn`` under ``name``), also counting the calls."""
    from probe_step import timed as seconds

    inner = seconds(table, name, fn)

    def wrapper(*args, **kwargs):
        table[name + " (calls)"] += 1
        return inner(*args, **kwargs)
    return wrapper


def instrument_engine(engine, table) -> None:
    import mlx.core as mx

    emit = engine._emit

    def waited_emit(reqs, tokens, samples):
        t0 = time.perf_counter()
        mx.eval(tokens)
        table["wait for tokens"] += time.perf_counter() - t0
        return timed(table, "emit", emit)(reqs, tokens, samples)

    engine._emit = waited_emit
    engine.runner.decode = timed(table, "decode (graph + launch)", engine.runner.decode)
    engine.prompts.run = timed(table, "prompt work", engine.prompts.run)
    engine.scheduler.schedule = timed(table, "schedule", engine.scheduler.schedule)
    engine._join = timed(table, "join", engine._join)
    engine.batch.keep = timed(table, "keep", engine.batch.keep)
    engine._housekeeping = timed(table, "housekeeping", engine._housekeeping)
    engine.step = timed(table, "step", engine.step)


def run_engine(engine, batch, n, table) -> tuple[float, int]:
    from mlxctl.engine.sampling import SamplingParams

    table.clear()
    t0 = time.perf_counter()
    streams = [engine.submit(p, SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True)) for p in batch]
    total = sum(s.collect().usage.completion_tokens for s in streams)
    return time.perf_counter() - t0, total


def run_batch_generator(loaded, batch, n, table) -> tuple[float, int]:
    import importlib

    g = importlib.import_module("mlx_lm.generate")  # the package re-exports a function of that name

    table.clear()
    patches = [(g.GenerationBatch, "next", "decode step (graph + launch + wait + per row)"),
               (g.PromptProcessingBatch, "prompt", "prompt passes"),
               (g.PromptProcessingBatch, "generate", "to generation (last prompt pass)"),
               (g.GenerationBatch, "extend", "join"),
               (g.BatchGenerator, "_next", "step")]
    saved = [(cls, name, getattr(cls, name)) for cls, name, _ in patches]
    for cls, name, label in patches:
        setattr(cls, name, timed(table, label, getattr(cls, name)))
    try:
        t0 = time.perf_counter()
        gen = g.BatchGenerator(loaded.model, completion_batch_size=max(32, len(batch)),
                               prefill_batch_size=min(8, len(batch)))
        gen.insert(batch, [n] * len(batch))
        total = 0
        while responses := gen.next_generated():
            total += len(responses)
        gen.close()
        return time.perf_counter() - t0, total
    finally:
        for cls, name, fn in saved:
            setattr(cls, name, fn)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--prompt-tokens", type=int, default=512)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--reps", type=int, default=2)
    args = p.parse_args()
    from mlxctl.engine.engine import Engine, EngineConfig
    from mlxctl.engine.scheduler import SchedulerConfig

    loaded = loaded_model(args, quiet=True)
    def batch(seed: int) -> list[list[int]]:  # new prompts each run: the engine's prefix cache never has them
        rng = random.Random(seed)
        return [[rng.randrange(100, 40000) for _ in range(args.prompt_tokens)] for _ in range(args.concurrency)]

    config = EngineConfig(SchedulerConfig(max_num_seqs=max(16, args.concurrency), max_prefilling=8))
    engine = Engine(lambda: loaded, config).start()
    table: dict = defaultdict(float)
    instrument_engine(engine, table)
    runs = {"batch_generator": lambda b: run_batch_generator(loaded, b, args.max_tokens, table),
            "engine": lambda b: run_engine(engine, b, args.max_tokens, table)}
    for seed, fn in enumerate(runs.values()):
        fn(batch(100 + seed))  # warm-up: kernels for every shape
    for rep in range(args.reps):
        prompts = batch(rep)  # the same for both
        for name, fn in runs.items():
            wall, tokens = fn(prompts)
            phases = {k: round(v, 4) for k, v in sorted(table.items())}
            print(json.dumps({"rep": rep, "who": name, "concurrency": args.concurrency, "wall_s": round(wall, 3),
                              "tokens": tokens, "tok_s": round(tokens / wall, 1), "phases": phases}), flush=True)
    engine.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
