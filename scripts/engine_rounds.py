"""Rounds of C simultaneous requests through one engine, nothing else in the process: what a
sampling profiler (py-spy) watches, and a build's own figure for A/B runs of two checkouts.

  python scripts/engine_rounds.py --model REF [--load-format dummy] [--dtype native]
         [--prompt-tokens 542] [--shared-prefix 27] [--max-tokens 128] [--concurrency 64]
         [--rounds 6] [--warmup 2] [--no-prefix-cache] [--min-reuse-tokens N] [--align-tokens N]
         [--prefix-max-mib MIB] [--prefill-chunk N]
         [--clear-every STEPS] [--pool-cap-mib MIB] [--cache-limit-mib MIB] [--attention-buckets]

Each round draws new random prompts (``bench_engine.prompts``: with ``--shared-prefix N`` every
prompt opens with the same N tokens, as a chat template's system part does). Prints one JSON
line: the build (``mlxctl.__file__``), the settings and each measured round's output tok/s (all
generated tokens over the round's wall time, prefill included), MLX's buffer pool after it
(``pool_mib``) and how often the engine returned the pool during it (``pool_returns``: on CUDA
each return waits for the device). The warm-up rounds (kernels
built on first use) are not reported. ``--clear-every`` and ``--pool-cap-mib`` set when the
engine returns the pool (``EngineConfig.clear_cache_every`` and ``pool_cap_bytes``): a large
value of both never returns it, which tells whether the returns cost a round.
``--cache-limit-mib`` sets MLX's own bound on the pool (``mx.set_cache_limit``: past it, MLX
frees buffers one by one as they are returned, instead of the engine returning all at once).
``--attention-buckets`` rounds prefill passes' attention shapes up (``MLXCTL_ATTENTION_BUCKETS=1``,
models/short_attention.py: on CUDA, prompt groups of new lengths then share built graphs).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_engine import add_batch_args, add_model_args, engine_batch, loaded_model, prompts  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_args(p, required=True)
    add_batch_args(p, max_tokens=128)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--no-prefix-cache", action="store_true")
    p.add_argument("--min-reuse-tokens", type=int, default=None)
    p.add_argument("--align-tokens", type=int, default=None, help="PrefixConfig.align_tokens (0: hits kept whole)")
    p.add_argument("--prefix-max-mib", type=int, default=None, help="the prefix cache's budget (PrefixConfig.max_bytes)")
    p.add_argument("--clear-every", type=int, default=None, help="steps between the engine's pool returns")
    p.add_argument("--pool-cap-mib", type=int, default=None, help="the pool returned after a batch change past this")
    p.add_argument("--cache-limit-mib", type=int, default=None, help="mx.set_cache_limit: MLX's own bound on the pool")
    p.add_argument("--attention-buckets", action="store_true", help="prefill attention on rounded-up shapes (CUDA)")
    p.add_argument("--prefill-chunk", type=int, default=0,
                   help="prompt tokens a step (0: by backend; 4096 on a CPU plans steps as a GPU does)")
    args = p.parse_args()
    if args.rounds < 1 or args.warmup < 0 or args.concurrency < 1 or args.prompt_tokens < 1:
        p.error("--rounds, --concurrency and --prompt-tokens must be at least 1, --warmup at least 0")
    if args.prefix_max_mib is not None and args.prefix_max_mib < 1:  # 0 would mean the default budget
        p.error(f"--prefix-max-mib must be at least 1, got {args.prefix_max_mib}")

    import dataclasses

    import mlxctl
    from mlxctl.models.short_attention import BUCKETS_ENV

    if args.attention_buckets:  # read when the model is loaded
        os.environ[BUCKETS_ENV] = "1"
    from mlxctl.engine.engine import Engine, EngineConfig
    from mlxctl.engine.scheduler import SchedulerConfig

    loaded = loaded_model(args)
    config = EngineConfig(SchedulerConfig(max_num_seqs=max(16, args.concurrency), max_prefilling=8,
                                          prefill_chunk=args.prefill_chunk))
    prefix = {"enabled": False} if args.no_prefix_cache else {}
    if args.min_reuse_tokens is not None:
        prefix["min_reuse_tokens"] = args.min_reuse_tokens
    if args.align_tokens is not None:
        prefix["align_tokens"] = args.align_tokens
    if args.prefix_max_mib is not None:
        prefix["max_bytes"] = args.prefix_max_mib << 20
    returns = {} if args.clear_every is None else {"clear_cache_every": args.clear_every}
    if args.pool_cap_mib is not None:
        returns["pool_cap_bytes"] = args.pool_cap_mib << 20
    config = dataclasses.replace(config, prefix=dataclasses.replace(config.prefix, **prefix), **returns)
    import mlx.core as mx

    if args.cache_limit_mib is not None:
        mx.set_cache_limit(args.cache_limit_mib << 20)
    clears = [0]
    clear_cache = mx.clear_cache

    def counted_clear() -> None:  # the engine returns MLX's buffer pool now and then (Engine._housekeeping)
        clears[0] += 1
        clear_cache()

    mx.clear_cache = counted_clear
    engine = Engine(lambda: loaded, config).start()
    tps, pool, cleared = [], [], []
    try:
        for i in range(args.warmup + args.rounds):
            batch = prompts(loaded, args.prompt_tokens, args.concurrency, seed=1000 + i, shared=args.shared_prefix)
            before = clears[0]
            rate = engine_batch(engine, batch, args.max_tokens)
            if i >= args.warmup:
                tps.append(round(rate, 1))
                pool.append(round(mx.get_cache_memory() / 2**20))
                cleared.append(clears[0] - before)
        stats = engine.stats().get("prefix_cache", {})
    finally:
        engine.shutdown()
    print(json.dumps({"build": os.path.dirname(mlxctl.__file__), "concurrency": args.concurrency,
                      "prompt_tokens": args.prompt_tokens, "shared_prefix": args.shared_prefix,
                      "max_tokens": args.max_tokens, "prefix_cache": not args.no_prefix_cache,
                      "min_reuse_tokens": args.min_reuse_tokens, "align_tokens": args.align_tokens,
                      "prefix_max_mib": args.prefix_max_mib, "clear_every": args.clear_every,
                      "pool_cap_mib": args.pool_cap_mib, "cache_limit_mib": args.cache_limit_mib,
                      "attention_buckets": args.attention_buckets, "tps": tps, "pool_mib": pool, "pool_returns": cleared,
                      "prefix_hits": stats.get("hits"), "prefix_evictions": stats.get("evictions"),
                      "hits_aligned": stats.get("hits_aligned")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
