#!/usr/bin/env python3
"""Per-token cost of turning ids into text: the byte table against the tokenizer's decode.

  python scripts/bench_detok.py [--model REF] [--tokens 2000] [--reps 5]

Streams the ids of README.md, with the tokenizer the engine gets from the loader, through an OutputProcessor's detokenizer both ways (no stop
strings, then two), interleaved, and prints microseconds per token (median of the reps).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None)
    p.add_argument("--tokens", type=int, default=2000)
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args()
    from mlxctl.engine import output
    from mlxctl.engine.detokenize import IncrementalDetokenizer
    from mlxctl.engine.sampling import SamplingParams
    from mlxctl.models.loader import load_model
    from mlxctl.models.resolve import resolve_model

    tokenizer = load_model(resolve_model(args.model).path).tokenizer  # the engine's own
    ids = tokenizer.encode((Path(__file__).resolve().parents[1] / "README.md").read_text())[: args.tokens]
    generic = lambda tok, skip, ctx=(): IncrementalDetokenizer(tok, skip_special_tokens=skip, context_ids=ctx)  # noqa: E731
    ways = {"byte table": output.make_detokenizer, "tokenizer decode": generic}
    for stops in ((), ("</s>", "\n\nUser:")):
        times: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(args.reps):
            for name, make in ways.items():
                output.make_detokenizer = make
                proc = output.OutputProcessor(tokenizer, SamplingParams(max_tokens=None, stop=list(stops)), set(), 10**9)
                start = time.perf_counter()
                for token in ids:
                    proc.process(token, None)
                times[name].append((time.perf_counter() - start) / len(ids) * 1e6)
        print(f"{len(stops)} stop strings: " + ", ".join(f"{n} {statistics.median(t):.1f} us/token" for n, t in times.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
