#!/usr/bin/env python3
"""What a decode step after which rows leave the batch costs, taken apart (issue 18).

  python scripts/probe_leave.py --model /tmp/llama1b --rows 256 --prompt-tokens 542

Builds one batch of ``--rows`` rows (mlx-lm's ``BatchKVCache``, rows padded on the left like
groups that joined one step apart), then lets ``--group`` rows leave at a time, as the oldest
group of a 256-stream wave does, each step evaluated on its own (no overlap with the host):
``filter_ms`` (the batch's KV filtered as the engine does), ``clear_ms`` (MLX's pool returned, as
the engine's housekeeping does after a batch change over the pool cap), ``first_ms`` (the decode
step at the new row count) and ``second_ms`` (the next one, same shapes). Two passes over
fresh batches: in the second every row count has been seen, so a difference in ``first_ms``
between the passes is the cost of shapes met for the first time. ``--filter`` picks the filter:
``shipped`` (``engine/batch.py``'s ``_filter_kv``: runs of consecutive kept rows copied,
their common padding sliced off), ``gather`` (the engine before: the kept rows gathered, then
sliced), ``noshift`` (as shipped, padding kept). One JSON line per row count and pass; a summary on stderr.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, type=Path)
    p.add_argument("--rows", type=int, default=256)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--prompt-tokens", type=int, default=542)
    p.add_argument("--leaves", type=int, default=16, help="groups that leave, one a step")
    p.add_argument("--filter", default="shipped,gather")
    p.add_argument("--clear", action="store_true", help="return MLX's pool after each filter")
    args = p.parse_args()
    if args.rows < 2 or args.group < 1 or args.leaves * args.group >= args.rows:
        print("probe_leave.py: need 2+ rows and fewer leaving rows than rows", file=sys.stderr)
        return 2

    import mlx.core as mx
    from mlx_lm.models.cache import BatchKVCache
    from mlx_lm.utils import load_model

    from mlxctl.engine.batch import _filter_kv
    from mlxctl.engine.kv.rows import KeptRows

    model, _ = load_model(args.model)

    def gather(c: BatchKVCache, kept: KeptRows, shift: int) -> None:  # the engine before 2026-12-07
        c.keys, c.values = c.keys[kept.index][..., shift:, :], c.values[kept.index][..., shift:, :]
        c.offset, c.left_padding = c.offset[kept.index], c.left_padding[kept.index] - shift
        c._idx -= shift

    filters = {"shipped": _filter_kv, "gather": gather, "noshift": lambda c, kept, shift: _filter_kv(c, kept, 0)}

    def timed(fn) -> float:
        mx.synchronize()
        start = time.perf_counter()
        fn()
        mx.synchronize()
        return (time.perf_counter() - start) * 1000

    def batch() -> tuple[list[BatchKVCache], list[int], mx.array]:
        pads = [i // args.group for i in range(args.rows)]  # a group joined a step after the one before
        caches = [BatchKVCache(list(pads)) for _ in model.layers]
        prompt = mx.random.randint(0, 1000, (args.rows, args.prompt_tokens))
        for start in range(0, args.prompt_tokens, 128):
            mx.eval(model(prompt[:, start:start + 128], cache=caches))
        return caches, pads, mx.zeros((args.rows,), mx.int32)

    def decode(caches: list[BatchKVCache], tokens: mx.array) -> mx.array:
        out = mx.argmax(model(tokens[:, None], cache=caches)[:, -1], axis=-1)
        mx.eval(out)
        return out

    lines = []
    for name in args.filter.split(","):
        for run in (1, 2):
            caches, left, tokens = batch()
            holder = {"t": tokens}
            for _ in range(3):
                holder["t"] = decode(caches, holder["t"])
            plain = statistics.median(timed(lambda: holder.__setitem__("t", decode(caches, holder["t"])))
                                      for _ in range(5))
            for leave in range(args.leaves):
                keep = list(range(args.group, len(left)))  # the group with the least padding leaves
                left = [left[i] for i in keep]
                shift, kept = min(left), KeptRows(keep)
                left = [x - shift for x in left] if name != "noshift" else left

                def filt() -> None:
                    for c in caches:
                        filters[name](c, kept, shift)
                    holder["t"] = holder["t"][kept.index]
                    mx.eval([c.keys for c in caches], [c.values for c in caches], holder["t"])
                line = {"filter": name, "pass": run, "rows": len(keep), "shift": shift, "plain_ms_at_full": plain,
                        "filter_ms": timed(filt), "clear_ms": timed(mx.clear_cache) if args.clear else None}
                line["first_ms"] = timed(lambda: holder.__setitem__("t", decode(caches, holder["t"])))
                line["second_ms"] = timed(lambda: holder.__setitem__("t", decode(caches, holder["t"])))
                lines.append(line)
                print(json.dumps(line), flush=True)
            caches.clear()
            mx.clear_cache()
    for name in args.filter.split(","):
        for run in (1, 2):
            mine = [x for x in lines if x["filter"] == name and x["pass"] == run]
            print(f"{name} pass {run}: " + ", ".join(
                f"{k} {statistics.median(x[k] for x in mine):.1f}"
                for k in ("plain_ms_at_full", "filter_ms", "first_ms", "second_ms")), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
