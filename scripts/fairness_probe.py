#!/usr/bin/env python3
"""Issue 18's fairness case in one process: a request decoding while a long prompt prefills.

  python scripts/fairness_probe.py [--model REF] [--prompt-tokens 7600] [--prefill-step-ms MS ...]

For each ``--prefill-step-ms`` value (repeatable; omitted: the backend's default), a fresh
engine on the model: a short request starts decoding (greedy, no end), then a random prompt of
``--prompt-tokens`` tokens is submitted. Reported: the long prompt's time to first token and,
while it prefilled, how many tokens the short request got and the gaps between them.
"""

from __future__ import annotations

import argparse
import random
import statistics
import threading
import time


def probe(path: str, tokens: int, step_ms: int | None) -> dict:
    from mlxctl.engine.engine import Engine, EngineConfig
    from mlxctl.engine.events import TokenEvent
    from mlxctl.engine.sampling import SamplingParams
    from mlxctl.engine.scheduler import SchedulerConfig
    from mlxctl.models.loader import load_model

    engine = Engine(lambda: load_model(path), EngineConfig(SchedulerConfig(prefill_step_ms=step_ms))).start()
    try:
        engine.submit([1, 2, 3, 4], SamplingParams(temperature=0.0, max_tokens=4)).collect()  # warm
        rng = random.Random(0)
        long_prompt = [rng.randrange(100, 40000) for _ in range(tokens)]
        short = engine.submit([5, 6, 7, 8, 9], SamplingParams(temperature=0.0, max_tokens=None, ignore_eos=True))
        events = iter(short)
        next(events)
        start = time.perf_counter()
        first: list[float] = []
        long = engine.submit(long_prompt, SamplingParams(temperature=0.0, max_tokens=1))

        def watch() -> None:
            for event in long:
                if isinstance(event, TokenEvent) and not first:
                    first.append(time.perf_counter() - start)

        threading.Thread(target=watch, daemon=True).start()
        times = []
        for _ in events:
            times.append(time.perf_counter() - start)
            if first:
                break
        short.abort()
        gaps = [b - a for a, b in zip([0.0, *times], times) if b <= first[0]]
        return {"prefill_step_ms": engine.scheduler.cfg.prefill_step_ms, "long_ttft_s": round(first[0], 1),
                "short_tokens_meanwhile": len(gaps), "gap_median_s": round(statistics.median(gaps), 3),
                "gap_max_s": round(max(gaps), 2)}
    finally:
        engine.shutdown()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None, help="model reference (default: the built-in default model)")
    p.add_argument("--prompt-tokens", type=int, default=7600)
    p.add_argument("--prefill-step-ms", type=int, action="append", default=None)
    args = p.parse_args()
    from mlxctl.models.resolve import resolve_model

    path = str(resolve_model(args.model).path)
    for step_ms in args.prefill_step_ms or [None]:
        print(probe(path, args.prompt_tokens, step_ms), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
