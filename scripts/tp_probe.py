#!/usr/bin/env python3
"""Where a tensor-parallel decode step's time goes: mlx-lm's bare loop, with and without our
per-turn broadcast, on one process or on every rank of an ``mlx.launch`` job.

  python scripts/tp_probe.py --model /tmp/llama8b                       # one GPU
  mlx.launch -n 2 --backend nccl -- python scripts/tp_probe.py --model /tmp/llama8b

Greedy, fixed length, a random prompt. ``bare``: mlx-lm's ``generate_step`` over the (sharded)
model. ``turn sync``: the same loop plus, per token, what ``mlxctl``'s lockstep engine adds
to every turn (one ``all_sum`` of one word, evaluated and read back on the host). Rank 0
prints one JSON line with decode tok/s per variant (median over --reps) and the greedy tokens,
so a one-process and a sharded run can be compared token by token (``--dtype float32`` casts
the weights, to separate reduction-order noise from real divergence).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--dtype", default="native", help="native, bfloat16 or float32")
    p.add_argument("--prompt-tokens", type=int, default=512)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args()

    import mlx.core as mx
    from mlx_lm.generate import generate_step
    from mlx_lm.utils import load_model

    group = mx.distributed.init(strict=False)
    model, _ = load_model(__import__("pathlib").Path(args.model), lazy=True)
    if group.size() > 1:
        model.shard(group)
    if args.dtype != "native":
        model.set_dtype(getattr(mx, args.dtype))
    mx.eval(model.parameters())
    rng = random.Random(0)
    prompt = mx.array([rng.randrange(100, 40000) for _ in range(args.prompt_tokens)])

    def turn_sync() -> None:
        mx.distributed.all_sum(mx.array([0], dtype=mx.int32), group=group).item()

    def run(sync: bool) -> tuple[list[int], float]:
        toks, t_first = [], None
        for tok, _ in generate_step(prompt, model, max_tokens=args.max_tokens):
            toks.append(int(tok))
            if sync and group.size() > 1:
                turn_sync()
            t_first = t_first or time.perf_counter()
        return toks, (len(toks) - 1) / (time.perf_counter() - t_first)

    results: dict[str, list[float]] = {"bare": [], "turn sync": []}
    tokens = run(False)[0]  # warm-up (kernel compilation)
    run(True)
    for _ in range(args.reps):
        for name in results:
            results[name].append(run(name == "turn sync")[1])
    if group.rank() == 0:
        print(json.dumps({"ranks": group.size(), "dtype": args.dtype,
                          "tok_s": {k: round(statistics.median(v), 1) for k, v in results.items()},
                          "runs": {k: [round(x, 1) for x in v] for k, v in results.items()},
                          "tokens": tokens}), flush=True)


if __name__ == "__main__":
    main()
