#!/usr/bin/env python3
"""What structured output costs: decode tok/s with and without a grammar, in one process.

  python scripts/bench_constrained.py [--model REF] [--load-format auto|dummy] [--dtype auto]
         [--max-tokens 128] [--batch 1,8] [--reps 3]

Per batch size B: B greedy requests with ``ignore_eos`` and a fixed length, all unconstrained,
then all constrained (``json_object`` with a long free-text field, so the grammar never ends
early), then one constrained request among B-1 free ones; interleaved, median of ``reps``.
tok/s is generated tokens over the wall time from submit to the last token. Every shape runs
once first (kernels compile, the grammar is compiled and cached).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from bench_engine import add_model_args, loaded_model

SCHEMA = {"type": "object", "properties": {"story": {"type": "string"}}, "required": ["story"]}


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--batch", default="1,8")
    p.add_argument("--reps", type=int, default=3)
    return p.parse_args()


def run(engine, prompt, n, kinds) -> float:
    from mlxctl.engine.constraints import ConstraintSpec
    from mlxctl.engine.sampling import SamplingParams

    spec = ConstraintSpec("json_schema", json.dumps(SCHEMA))
    start = time.perf_counter()
    streams = [engine.submit(prompt, SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True,
                                                    constraint=spec if constrained else None))
               for constrained in kinds]
    total = sum(len(s.collect().token_ids) for s in streams)
    return total / (time.perf_counter() - start)


def main() -> int:
    args = parse()
    from mlxctl.api.prompt import chat_messages, render_chat
    from mlxctl.engine.engine import Engine

    loaded = loaded_model(args, quiet=True)
    prompt = render_chat(loaded.tokenizer, chat_messages("Tell a long story as JSON: {\"story\": ...}"))
    result = {"model": loaded.name, "max_tokens": args.max_tokens, "runs": {}}
    with Engine(lambda: loaded) as engine:
        for b in (int(x) for x in args.batch.split(",")):
            shapes = {"free": [False] * b, "all_constrained": [True] * b}
            if b > 1:
                shapes["one_constrained"] = [True] + [False] * (b - 1)
            for kinds in shapes.values():
                run(engine, prompt, 8, kinds)
            got = {name: [] for name in shapes}
            for _ in range(args.reps):
                for name, kinds in shapes.items():
                    got[name].append(run(engine, prompt, args.max_tokens, kinds))
            med = {name: statistics.median(v) for name, v in got.items()}
            result["runs"][b] = {**{f"{k}_tok_s": round(v, 1) for k, v in med.items()},
                                 **{f"{k}_over_free": round(v / med["free"], 3) for k, v in med.items() if k != "free"}}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
