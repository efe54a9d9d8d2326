#!/usr/bin/env python3
"""Engine vs mlx-lm, in one process, on the same loaded model.

  python scripts/bench_engine.py [--model REF] [--dtype auto] [--max-tokens 128] [--reps 3]

1. Single stream: mlx-lm's `stream_generate` vs `Engine.submit` (greedy), runs interleaved
   A B A B; reports decode tok/s (first token to last) and the ratio engine / mlx-lm.
2. Eight concurrent requests: mlx-lm's `batch_generate` (its BatchGenerator) vs the engine with
   8 submissions at once; reports generated tok/s over wall time and the ratio.
Greedy outputs of the two single-stream runs are compared token by token.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time

PROMPT = "Write a long story about a dragon who learns to cook. Describe every dish in detail."
BATCH_PROMPTS = [
    "Write a long story about a dragon who learns to cook.",
    "Explain how a bicycle works, part by part, in detail.",
    "List fifty animals and one fact about each.",
    "Describe the history of the printing press at length.",
    "Write a detailed recipe for bread and explain each step.",
    "Tell me about the planets of the solar system, one by one.",
    "Write a long poem about the sea.",
    "Explain photosynthesis to a ten year old, with many examples.",
]


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None, help="model reference (default: the catalog default)")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    return p.parse_args()


def mlx_lm_single(loaded, prompt_ids, n):
    from mlx_lm import stream_generate
    from mlx_lm.sample_utils import make_sampler

    toks, last = [], None
    for r in stream_generate(loaded.model, loaded.tokenizer, prompt_ids, max_tokens=n, sampler=make_sampler(0.0)):
        toks.append(r.token)
        last = r
    return toks, last.generation_tps


def engine_single(engine, prompt_ids, n):
    from mlxctl.engine.sampling import SamplingParams

    got = engine.submit(prompt_ids, SamplingParams(temperature=0.0, max_tokens=n)).collect()
    return list(got.token_ids), got.timings.decode_tps


def mlx_lm_batch(loaded, prompts, n):
    from mlx_lm import batch_generate

    t0 = time.perf_counter()
    res = batch_generate(loaded.model, loaded.tokenizer, prompts, max_tokens=n, return_token_ids=True)
    dt = time.perf_counter() - t0
    return sum(len(t) for t in res.token_ids) / dt


def engine_batch(engine, prompts, n):
    from mlxctl.engine.sampling import SamplingParams

    t0 = time.perf_counter()
    streams = [engine.submit(p, SamplingParams(temperature=0.0, max_tokens=n)) for p in prompts]
    total = sum(s.collect().usage.completion_tokens for s in streams)
    return total / (time.perf_counter() - t0)


def main() -> int:
    args = parse()
    from mlxctl.api.prompt import chat_messages, render_chat
    from mlxctl.engine.engine import Engine
    from mlxctl.models.loader import load_model
    from mlxctl.models.resolve import resolve_model

    resolved = resolve_model(args.model, progress=lambda m: print(m, file=sys.stderr))
    loaded = load_model(resolved.path, dtype=args.dtype)
    engine = Engine(lambda: loaded).start()
    prompt = render_chat(loaded.tokenizer, chat_messages(PROMPT))
    batch = [render_chat(loaded.tokenizer, chat_messages(p)) for p in BATCH_PROMPTS]
    n = args.max_tokens
    mlx_lm_single(loaded, prompt, 8), engine_single(engine, prompt, 8)  # warm-up
    single_ref, single_eng, same = [], [], True
    for _ in range(args.reps):
        a_toks, a = mlx_lm_single(loaded, prompt, n)
        b_toks, b = engine_single(engine, prompt, n)
        single_ref.append(a), single_eng.append(b)
        same &= a_toks[: len(b_toks)] == b_toks[: len(a_toks)]
    batch_ref, batch_eng = [], []
    for _ in range(args.reps):
        batch_ref.append(mlx_lm_batch(loaded, batch, n))
        batch_eng.append(engine_batch(engine, batch, n))
    engine.shutdown()
    result = report(args, resolved.name, single_ref, single_eng, batch_ref, batch_eng, same)
    print(json.dumps(result, indent=2) if args.json else human(result))
    return 0


def report(args, name, sr, se, br, be, same) -> dict:
    import mlx.core as mx

    med = statistics.median
    return {
        "model": name, "dtype": args.dtype, "max_tokens": args.max_tokens, "reps": args.reps,
        "device": str(mx.default_device()), "mlx": mx.__version__, "machine": platform.machine(),
        "single_mlx_lm_tps": med(sr), "single_engine_tps": med(se), "single_ratio": med(se) / med(sr),
        "single_runs": {"mlx_lm": sr, "engine": se}, "single_greedy_identical": same,
        "batch8_mlx_lm_tps": med(br), "batch8_engine_tps": med(be), "batch8_ratio": med(be) / med(br),
        "batch8_runs": {"mlx_lm": br, "engine": be},
    }


def human(r: dict) -> str:
    return "\n".join([
        f"model {r['model']} ({r['dtype']}) on {r['device']}, mlx {r['mlx']}, {r['max_tokens']} new tokens, median of {r['reps']}",
        f"single stream decode: mlx-lm stream_generate {r['single_mlx_lm_tps']:.1f} tok/s, engine {r['single_engine_tps']:.1f} tok/s, ratio {r['single_ratio']:.3f}",
        f"greedy tokens identical: {r['single_greedy_identical']}",
        f"8 concurrent: mlx-lm batch_generate {r['batch8_mlx_lm_tps']:.1f} tok/s, engine {r['batch8_engine_tps']:.1f} tok/s, ratio {r['batch8_ratio']:.3f}",
    ])


if __name__ == "__main__":
    sys.exit(main())
