#!/usr/bin/env python3
"""What a new prefill shape costs on first use, fused attention against unfused (issue 18).

  python scripts/probe_prefill.py --model PATH [--rows 1,2,3,5,8] [--lengths 512,384,448] [--unfused | --buckets]

On MLX's CUDA backend attention over more than one query goes through cuDNN, whose graph is
built per shape (issue 19 measured ~40 ms a build for verify passes). Prefill passes have many
shapes too: the rows of a prefill group and the chunk's length vary with what arrives. For each
(rows, length) this runs one forward pass into a fresh cache twice and prints both times: the
first pays for whatever is built for that shape, the second shows the pass itself. With
``--unfused`` every multi-query pass goes through mlxctl's unfused attention
(models/short_attention.py, its query limit lifted), which builds nothing per shape. With
``--buckets`` prefill passes run on their shapes rounded up (``MLXCTL_ATTENTION_BUCKETS=1``), so
lengths within one bucket (e.g. ``--lengths 400,450,500``) should pay for one build between them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import mlx.core as mx
from mlx_lm.models.cache import make_prompt_cache
from mlx_lm.utils import load_model


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--rows", default="1,2,3,5,8")
    p.add_argument("--lengths", default="512,384,448")
    p.add_argument("--unfused", action="store_true", help="every multi-query pass unfused (no per-shape build)")
    p.add_argument("--buckets", action="store_true", help="prefill passes on shapes rounded up (MLXCTL_ATTENTION_BUCKETS=1)")
    args = p.parse_args()
    if args.unfused or args.buckets:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from mlxctl.models import short_attention

        if args.unfused:
            short_attention.MAX_QUERIES = 1 << 20
        else:
            os.environ[short_attention.BUCKETS_ENV] = "1"
        short_attention.install("cuda")
    model, _ = load_model(Path(args.model))
    vocab = model.args.vocab_size
    mx.eval(model(mx.random.randint(0, vocab, (1, 16)), cache=make_prompt_cache(model)))  # first kernels
    out = {}
    for length in (int(x) for x in args.lengths.split(",")):
        for rows in (int(x) for x in args.rows.split(",")):
            times = []
            for _ in range(2):
                tokens = mx.random.randint(0, vocab, (rows, length))
                cache = make_prompt_cache(model)
                mx.eval(tokens)
                t0 = time.perf_counter()
                mx.eval(model(tokens, cache=cache))
                times.append(round((time.perf_counter() - t0) * 1000, 2))
            out[f"{rows}x{length}"] = {"first_ms": times[0], "again_ms": times[1]}
            print(rows, length, json.dumps(out[f"{rows}x{length}"]), flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
