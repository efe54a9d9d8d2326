#!/usr/bin/env python3
"""What a verify pass of k tokens costs against a one-token step, on one model (issue 19).

  python scripts/probe_verify.py --model PATH [--prompt-tokens 512] [--widths 1,2,4,8,9,16,17] [--steps 24] [--unfused]

For each width k, after a --prompt-tokens prefill into mlx-lm's own cache: (a) "fixed": k tokens
forward at the same cache length, trimmed back after each pass; (b) "growing": k tokens forward
with the cache left to grow, as accepted drafts make it. Prints milliseconds per pass (median,
and the first pass apart: kernels built on first use) for each. If growing passes cost far more
than fixed ones, something is built per key length.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache
from mlx_lm.utils import load_model


def timed(model, cache, tokens) -> float:
    t0 = time.perf_counter()
    mx.eval(model(tokens[None], cache=cache))
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--prompt-tokens", type=int, default=512)
    p.add_argument("--widths", default="1,2,4,8,9,16,17")
    p.add_argument("--steps", type=int, default=24)
    p.add_argument("--unfused", action="store_true",
                   help="short passes through mlxctl's unfused attention (models/short_attention.py), as the engine does on CUDA")
    args = p.parse_args()
    if args.unfused:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from mlxctl.models import short_attention

        short_attention.install("cuda")
    model, _ = load_model(Path(args.model))
    vocab = model.args.vocab_size
    out = {}
    for k in (int(w) for w in args.widths.split(",")):
        row = {}
        for mode in ("fixed", "growing"):
            cache = make_prompt_cache(model)
            mx.eval(model(mx.random.randint(0, vocab, (1, args.prompt_tokens)), cache=cache))
            times = []
            for _ in range(args.steps):
                times.append(timed(model, cache, mx.random.randint(0, vocab, (k,))))
                if mode == "fixed":
                    for c in cache:
                        c.trim(k)
            row[mode] = {"first_ms": round(times[0], 2), "median_ms": round(statistics.median(times[1:]), 2),
                         "max_ms": round(max(times[1:]), 2)}
        out[k] = row
        print(k, json.dumps(row), flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
