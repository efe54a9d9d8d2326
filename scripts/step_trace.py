#!/usr/bin/env python3
"""Sum up an engine step trace (``MLXCTL_STEP_TRACE=FILE``, mlxctl/engine/step_trace.py).

The trace is cut into runs where the engine sat idle longer than ``--gap`` seconds (between
benchmark repetitions); for each run: its steps, wall time, the time in steps and between them,
tokens emitted and their rate, and the steps split into decode-only ones (no prompt work) and
ones with prompt work, with the decode-only steps' median and p90 wall time and rows; and the
decode-only steps after which rows left the batch (``leave_*``: requests ended there, and the
batch's KV was cut to the rows that go on; a run's last step counts when it is decode-only),
from each step's rows (decoding as it starts) and joins (decoding from the next step on); and
the decode-only steps whose pass shape (rows by ``width``; traces without widths: rows) the
trace had not met before (``first_shape_*``: on CUDA MLX builds a new shape's kernels then).

    python scripts/step_trace.py TRACE [--gap 0.5] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys


def runs(lines: list[dict], gap: float) -> list[list[dict]]:
    out: list[list[dict]] = []
    for line in lines:
        if not out or line["idle"] > gap:
            out.append([])
        out[-1].append(line)
    return out


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else 0.0


def summary(run: list[dict], seen: set | None = None) -> dict:
    """One run's sums; ``seen``: the pass shapes met in the runs before (updated)."""
    seen = set() if seen is None else seen
    wall = run[-1]["t"] + run[-1]["dt"] - run[0]["t"]
    decode = [s for s in run if not s["prefill_tokens"]]
    prompt = [s for s in run if s["prefill_tokens"]]
    emitted = sum(s["emitted"] for s in run)
    # a step's rows are those decoding as it starts; the requests it joins decode from the next one on
    leave = [s for s, after in zip(run, run[1:] + [None]) if not s["prefill_tokens"]
             and s["rows"] + s["joined"] > (after["rows"] if after else 0)]
    first = []
    for s in decode:
        shape = (s["rows"], s.get("width", 1))
        if shape not in seen:
            seen.add(shape)
            first.append(s)
    return {
        "steps": len(run), "wall_s": round(wall, 4), "in_steps_s": round(sum(s["dt"] for s in run), 4),
        "between_steps_s": round(sum(s["idle"] for s in run[1:]), 4), "emitted": emitted,
        "tok_s": round(emitted / wall, 1) if wall > 0 else 0.0, "max_rows": max(s["rows"] for s in run),
        "decode_steps": len(decode),
        "decode_ms_p50": round(1000 * statistics.median([s["dt"] for s in decode]), 3) if decode else 0.0,
        "decode_ms_p90": round(1000 * _pct([s["dt"] for s in decode], 0.9), 3),
        "decode_rows_p50": statistics.median([s["rows"] for s in decode]) if decode else 0,
        "decode_s": round(sum(s["dt"] for s in decode), 4),
        "leave_steps": len(leave),
        "leave_ms_p50": round(1000 * statistics.median([s["dt"] for s in leave]), 3) if leave else 0.0,
        "leave_s": round(sum(s["dt"] for s in leave), 4),
        "prompt_steps": len(prompt), "prompt_s": round(sum(s["dt"] for s in prompt), 4),
        "prompt_tokens": sum(s["prefill_tokens"] for s in prompt),
        "first_token_step_s": round(next((s["t"] + s["dt"] - run[0]["t"] for s in run if s["joined"]), 0.0), 4),
        "speculative_steps": sum(1 for s in run if s["spec"]),
        "first_shape_steps": len(first), "first_shape_s": round(sum(s["dt"] for s in first), 4),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--gap", type=float, default=0.5, help="idle seconds that start a new run")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    try:
        with open(args.trace, encoding="utf-8") as f:
            lines = [json.loads(line) for line in f if line.strip()]
    except (OSError, json.JSONDecodeError) as exc:
        print(f"step_trace: cannot read {args.trace}: {exc}", file=sys.stderr)
        return 2
    if not lines:
        print(f"step_trace: {args.trace} holds no steps", file=sys.stderr)
        return 2
    seen: set = set()
    result = [summary(r, seen) for r in runs(lines, args.gap)]
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for i, r in enumerate(result):
            print(f"run {i}: " + ", ".join(f"{k}={v}" for k, v in r.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
