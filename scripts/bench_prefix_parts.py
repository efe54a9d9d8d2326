"""What each part of the prefix cache costs, in one process, interleaved (issue 18): engines with
the cache as shipped, with prompts not remembered, with prompts not looked up, with answers not
remembered, with short hits let go (``min_reuse_tokens``, a setting: groups holding a hit
shorter than it prefill fresh), and without the cache, given the same fresh prompts each round.

  python scripts/bench_prefix_parts.py --model tiny/config.json --load-format dummy --dtype float32 \
         [--prompt-tokens 542] [--shared-prefix 0] [--max-tokens 32] [--concurrency 64] [--reps 5] \
         [--let-go 128]

``--shared-prefix N``: every prompt opens with the same N tokens (a chat template's system part),
so from the second round on every prompt is a hit of about N tokens.

A part is turned off by replacing the engine's ``PrefixReuse`` method with one that does nothing
(a measuring device, not a setting users have). Prints each contender's tok/s per round and median.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_engine import add_batch_args, add_model_args, engine_batch, loaded_model, prompts  # noqa: E402

PARTS = {"no prompts remembered": "remember_prompt", "no lookups": "attach", "no answers remembered": "remember_answer"}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(p, required=True)
    add_batch_args(p, max_tokens=32)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--let-go", type=int, default=128, help="the short-hits-let-go contender's min_reuse_tokens")
    args = p.parse_args()
    import dataclasses

    from mlxctl.engine.engine import Engine, EngineConfig
    from mlxctl.engine.scheduler import SchedulerConfig

    loaded = loaded_model(args)
    on = EngineConfig(SchedulerConfig(max_num_seqs=max(16, args.concurrency), max_prefilling=8, prefill_chunk=4096))
    off = dataclasses.replace(on, prefix=dataclasses.replace(on.prefix, enabled=False))
    engines = {"cache on": Engine(lambda: loaded, on).start()}
    engines.update({name: Engine(lambda: loaded, on).start() for name in PARTS})
    let_go = dataclasses.replace(on, prefix=dataclasses.replace(on.prefix, min_reuse_tokens=args.let_go))
    engines[f"hits < {args.let_go} let go"] = Engine(lambda: loaded, let_go).start()
    engines["cache off"] = Engine(lambda: loaded, off).start()
    for e in engines.values():  # warm-up, and the engine thread has made its PrefixReuse
        engine_batch(e, prompts(loaded, args.prompt_tokens, args.concurrency, 0, args.shared_prefix), args.max_tokens)
    for name, method in PARTS.items():
        setattr(engines[name].prefix, method, lambda *a, **k: None)
    runs: dict[str, list[float]] = {k: [] for k in engines}
    for rep in range(args.reps):
        batch = prompts(loaded, args.prompt_tokens, args.concurrency, rep + 1, args.shared_prefix)
        for name, e in engines.items():
            runs[name].append(engine_batch(e, batch, args.max_tokens))
    for name, r in runs.items():
        print(f"{name:>22}: median {statistics.median(r):7.1f} tok/s  rounds {[round(x) for x in r]}")
    for e in engines.values():
        e.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
