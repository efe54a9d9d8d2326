#!/usr/bin/env python3
"""The engine against mlx-lm, in one process, on the same loaded model.

  python scripts/bench_engine.py [--model REF] [--load-format auto|dummy] [--dtype auto]
         [--prompt-tokens N] [--max-tokens 128] [--temperature 0] [--concurrency 8,64] [--reps 3] [--json]
         [--prefill-chunk N] [--speculative off|ngram] [--num-draft-tokens N] [--variant NAME:key=value,...]

Single stream (greedy, fixed length): mlx-lm's bare `generate_step` loop and `stream_generate`
against `Engine.submit`, interleaved A B C A B C; decode tok/s is measured from the first
token to the last. Concurrency C: mlx-lm's `BatchGenerator` (C prompts inserted at once)
against C simultaneous engine submissions; tok/s is all generated tokens over wall time,
prefill included. With --prompt-tokens N each round draws new random prompts, the same for
every contender, so the engine's prefix cache never serves them (unless ``--shared-prefix``).
Every shape is run once before it is measured (first runs compile kernels).

``--variant`` adds an engine with other settings on the same loaded model, measured in the same
interleaved rounds (keys: prefill_chunk, max_prefilling, prefill_step_ms, pool_cap_bytes, speculative,
num_draft_tokens, max_rows (the largest batch that speculates), grow (1: ngram drafts grow in batches too,
0: never; unset: while a request is alone, as shipped),
chain (0: each speculative check read before the next is queued), measured (0: check whenever a
draft is likely, without the policy), kv_bits), so an engine
setting is compared side by side, e.g. ``--variant clear-always:pool_cap_bytes=0``. Two keys change the load instead (at concurrency C):
``arrival_ms=T`` submits the C requests spread evenly over T ms, as a burst reaches a server
one by one; ``gil_busy_pct=P`` runs a thread of pure Python holding the GIL P% of the time
(1 ms bursts) while the batch runs, as a server's event loop does.
``prefix_cache=0`` turns a variant's prefix cache off, ``min_reuse_tokens=N`` sets the shortest
hit its grouped prompts keep and ``align_tokens=N`` how far a grouped prompt's hit may reach past
the group's least before it is kept whole (0: always). ``--shared-prefix N`` starts every random prompt with the same N
tokens, as a chat template's system part does, so each request after the first hits the cache
for about N tokens.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time

PROMPT = "Write a long story about a dragon who learns to cook. Describe every dish in detail."


def add_model_args(p: argparse.ArgumentParser, required: bool = False, model_help: str | None = None,
                   formats: tuple[str, ...] | None = ("auto", "dummy")) -> None:
    """``--model``, ``--load-format`` and ``--dtype``, as every script here that loads a model takes
    them (``loaded_model`` loads it). ``formats=None``: --load-format is checked only by the loader."""
    p.add_argument("--model", required=required, default=None, help=model_help)
    p.add_argument("--load-format", default="auto", choices=formats)
    p.add_argument("--dtype", default="auto")


def add_batch_args(p: argparse.ArgumentParser, max_tokens: int) -> None:
    """The rounds of random prompts (``prompts``) a script sends at once: their length, shared opening,
    reply length and how many."""
    p.add_argument("--prompt-tokens", type=int, default=542)
    p.add_argument("--shared-prefix", type=int, default=0)
    p.add_argument("--max-tokens", type=int, default=max_tokens)
    p.add_argument("--concurrency", type=int, default=64)


def loaded_model(args: argparse.Namespace, quiet: bool = False, **options):
    """The model ``add_model_args``' options name, loaded on this thread; its progress printed on
    stderr unless ``quiet``. ``options`` go to ``model_loader`` as they are (only those given: an
    older build's loader, under PYTHONPATH, may not take them)."""
    from mlxctl.generation import model_loader

    progress = None if quiet else lambda m: print(m, file=sys.stderr)
    return model_loader(args.model, args.dtype, progress, args.load_format, **options)()


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p, model_help="model reference, or a preset with --load-format dummy")
    p.add_argument("--moe-top-k", type=int, default=None, help="route MoE models to K experts per token")
    p.add_argument("--prompt-tokens", type=int, default=0, help="random prompt of N tokens (0: a chat prompt)")
    p.add_argument("--shared-prefix", type=int, default=0,
                   help="the first N tokens of every random prompt are the same (a chat template's system part)")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--temperature", type=float, default=0.0,
                   help="sample every contender at this temperature (0: greedy; above 0 replies are "
                        "random text, where prompt lookup rarely finds a draft)")
    p.add_argument("--concurrency", default="8", help="comma-separated batch sizes")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--prefill-chunk", type=int, default=0, help="the engine's prompt tokens per step (0: by backend)")
    p.add_argument("--speculative", default="off", help="the engine's speculative decoding: off or ngram")
    p.add_argument("--num-draft-tokens", type=int, default=8, help="with --speculative: draft tokens per step")
    p.add_argument("--draft-model", default=None, help="with --speculative draft: the drafting model")
    p.add_argument("--variant", action="append", default=[], metavar="NAME:key=value,...",
                   help="another engine with these settings, measured alongside (repeatable)")
    return p.parse_args()


def prompts(loaded, n_tokens: int, count: int, seed: int = 0, shared: int = 0) -> list[list[int]]:
    """``count`` random prompts of ``n_tokens`` (a new set for each ``seed``; the first
    ``shared`` tokens the same in every set), or with 0 the one chat prompt ``count`` times (so
    every request after the first is a prefix-cache hit)."""
    from mlxctl.api.prompt import chat_messages, render_chat

    if n_tokens == 0:
        base = render_chat(loaded.tokenizer, chat_messages(PROMPT))
        return [base[:-1] + [base[-1]] for _ in range(count)]
    fixed = random.Random(-1)  # the shared opening: the same in every set
    head = [fixed.randrange(100, 40000) for _ in range(min(shared, n_tokens))]
    rng = random.Random(seed)
    return [head + [rng.randrange(100, 40000) for _ in range(n_tokens - len(head))] for _ in range(count)]


def mlx_lm_sampler(temperature: float):
    from mlx_lm.sample_utils import make_sampler

    return make_sampler(temp=temperature) if temperature > 0 else None


def bare_generate_step(loaded, prompt, n, temperature=0.0):
    import mlx.core as mx
    from mlx_lm.generate import generate_step

    toks, t_first = [], None
    for tok, _ in generate_step(mx.array(prompt), loaded.model, max_tokens=n, sampler=mlx_lm_sampler(temperature)):
        toks.append(int(tok))
        t_first = t_first or time.perf_counter()
    return toks, (n - 1) / (time.perf_counter() - t_first)


def stream_generate_tps(loaded, prompt, n, temperature=0.0):
    from mlx_lm import stream_generate

    last = None
    for last in stream_generate(loaded.model, loaded.tokenizer, prompt, max_tokens=n,
                                sampler=mlx_lm_sampler(temperature)):
        pass
    return None, last.generation_tps


def engine_single(engine, prompt, n, temperature=0.0):
    from mlxctl.engine.sampling import SamplingParams

    got = engine.submit(prompt, SamplingParams(temperature=temperature, max_tokens=n, ignore_eos=True)).collect()
    return list(got.token_ids), got.timings.decode_tps


def mlx_lm_batch(loaded, batch, n, temperature=0.0):
    from mlx_lm.generate import BatchGenerator

    t0 = time.perf_counter()
    gen = BatchGenerator(loaded.model, completion_batch_size=max(32, len(batch)), prefill_batch_size=min(8, len(batch)),
                         sampler=mlx_lm_sampler(temperature))
    gen.insert(batch, [n] * len(batch))
    total = 0
    while responses := gen.next_generated():
        total += sum(1 for r in responses if r.finish_reason != "stop")
    gen.close()
    return total / (time.perf_counter() - t0)


def engine_batch(engine, batch, n, temperature=0.0, load=None):
    from mlxctl.engine.sampling import SamplingParams

    load = load or {}
    arrival = load.get("arrival_ms", 0) / 1000 / max(1, len(batch) - 1)
    busy = GilBusy(load["gil_busy_pct"]) if load.get("gil_busy_pct") else None
    try:
        t0 = time.perf_counter()
        streams = []
        for i, p in enumerate(batch):
            if arrival and i:
                time.sleep(max(0.0, t0 + i * arrival - time.perf_counter()))
            streams.append(engine.submit(p, SamplingParams(temperature=temperature, max_tokens=n, ignore_eos=True)))
        total = sum(s.collect().usage.completion_tokens for s in streams)
        elapsed = time.perf_counter() - t0
    finally:
        if busy:
            load.setdefault("gil_held", []).append(round(busy.stop(), 3))
    return total / elapsed


class GilBusy:
    """A thread that runs pure Python (holding the GIL) ``pct`` percent of the time, in 1 ms
    bursts: what a server's event loop takes from the engine thread (``gil_busy_pct``). Where
    the engine holds the GIL the thread waits, so what it achieved is measured: its own CPU time
    (it runs only while holding the GIL) over the wall time, returned by :meth:`stop`."""

    def __init__(self, pct: int) -> None:
        import threading

        self.busy, self.idle = 0.001, 0.001 * (100 - pct) / pct
        self._done = threading.Event()
        self._cpu = 0.0
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        start = time.thread_time()
        while not self._done.is_set():
            end = time.perf_counter() + self.busy
            while time.perf_counter() < end:
                pass
            time.sleep(self.idle)
        self._cpu = time.thread_time() - start

    def stop(self) -> float:
        """Stop; the share of the wall time the thread held the GIL."""
        self._done.set()
        self._thread.join()
        return self._cpu / (time.perf_counter() - self._t0)


def run_single(loaded, engines, prompt, args) -> dict:
    n, t = args.max_tokens, args.temperature
    bare = {"generate_step": lambda: bare_generate_step(loaded, prompt, n, t),
            "stream_generate": lambda: stream_generate_tps(loaded, prompt, n, t)}
    ours = {name: (lambda e=e: engine_single(e, prompt, n, t)) for name, e in engines.items()}
    for fn in (*bare.values(), *ours.values()):
        fn()  # warm-up at the measured shape
    runs = {k: [] for k in (*bare, *ours)}
    same = True
    for _ in range(args.reps):
        ref, tps = bare["generate_step"]()
        runs["generate_step"].append(tps)
        runs["stream_generate"].append(bare["stream_generate"]()[1])
        for name, fn in ours.items():
            got, tps = fn()
            runs[name].append(tps)
            same &= ref == got
    return summarise(runs, same if t == 0 else None)  # sampled replies differ by design


def run_batch(loaded, engines, concurrency: int, args) -> dict:
    """Each round gives every contender the same new prompts: no engine's prefix cache holds
    them (mlx-lm's batch generator has none), so both prefill every prompt in full."""
    n, t = args.max_tokens, args.temperature
    fns = {"batch_generator": lambda batch: mlx_lm_batch(loaded, batch, n, t),
           **{name: (lambda batch, e=e: engine_batch(e, batch, n, t, LOADS.get(name))) for name, e in engines.items()}}
    seeds = iter(range(1, 1 << 30))
    for fn in fns.values():
        _pool_returned()
        fn(prompts(loaded, args.prompt_tokens, concurrency, next(seeds), args.shared_prefix))
    runs = {k: [] for k in fns}
    for _ in range(args.reps):
        batch = prompts(loaded, args.prompt_tokens, concurrency, next(seeds), args.shared_prefix)
        for name, fn in fns.items():
            _pool_returned()
            runs[name].append(fn(batch))
    return summarise(runs, None)


def _pool_returned() -> None:
    """MLX's buffer pool is the process's: what one contender left there is returned before the
    next runs, so none starts with another's buffers held (on an 80 GB H100 mlx-lm's batch
    generator ran out of memory at 256 streams after three engines' rounds)."""
    import mlx.core as mx

    mx.clear_cache()


LOADS: dict[str, dict] = {}  # a variant's arrival_ms and gil_busy_pct: how its requests arrive, not engine settings


def engine_configs(args, sizes: list[int]) -> dict:
    """The base engine's config and one per ``--variant``, by name."""
    import dataclasses

    from mlxctl.engine.engine import EngineConfig
    from mlxctl.engine.scheduler import SchedulerConfig
    from mlxctl.engine.speculative import SpeculationConfig

    base = EngineConfig(SchedulerConfig(max_num_seqs=max([16, *sizes]), max_prefilling=8,
                                        prefill_chunk=args.prefill_chunk),
                        speculation=SpeculationConfig(args.speculative, args.num_draft_tokens, args.draft_model))
    configs = {"engine": base}
    for spec in args.variant:
        name, _, settings = spec.partition(":")
        scheduler, engine, speculation, prefix = {}, {}, {}, {}
        for item in filter(None, settings.split(",")):
            key, _, value = item.partition("=")
            if key in ("prefill_chunk", "max_prefilling", "prefill_step_ms"):
                scheduler[key] = int(value)
            elif key in ("prefix_cache", "min_reuse_tokens", "align_tokens"):
                prefix["enabled" if key == "prefix_cache" else key] = bool(int(value)) if key == "prefix_cache" \
                    else int(value)
            elif key == "pool_cap_bytes":
                engine[key] = int(value)
            elif key == "kv_bits":  # --kv-bits, groups of 64
                from mlxctl.engine.kv_config import KVQuant

                engine["kv"] = KVQuant(int(value), 64)
            elif key in ("arrival_ms", "gil_busy_pct"):
                LOADS.setdefault(f"engine[{name}]", {})[key] = int(value)
            elif key in ("speculative", "num_draft_tokens", "max_rows", "grow", "chain", "measured"):
                speculation["mode" if key == "speculative" else key] = value if key == "speculative" else \
                    bool(int(value)) if key in ("grow", "chain", "measured") else int(value)
            else:
                raise SystemExit(f"--variant {spec}: unknown setting {key!r} (prefill_chunk, max_prefilling, "
                                 "prefill_step_ms, pool_cap_bytes, speculative, num_draft_tokens, max_rows, grow, chain, "
                                 "measured, kv_bits, prefix_cache, min_reuse_tokens, align_tokens, arrival_ms, gil_busy_pct)")
        configs[f"engine[{name}]"] = dataclasses.replace(
            base, scheduler=dataclasses.replace(base.scheduler, **scheduler),
            speculation=dataclasses.replace(base.speculation, **speculation),
            prefix=dataclasses.replace(base.prefix, **prefix), **engine)
    return configs


def summarise(runs: dict, same) -> dict:
    med = {k: statistics.median(v) for k, v in runs.items()}
    ours = [k for k in med if k.startswith("engine")]
    out = {"median_tps": med, "runs": runs,
           "engine_ratio_vs": {k: med["engine"] / v for k, v in med.items() if k != "engine"},
           "ratios": {f"{a} / {k}": med[a] / v for a in ours for k, v in med.items() if k not in ours}}
    if same is not None:
        out["greedy_tokens_identical"] = same
    return out


def main() -> int:
    args = parse()
    from mlxctl.engine.engine import Engine

    sizes = [int(c) for c in args.concurrency.split(",") if c]
    configs = engine_configs(args, sizes)
    loaded = loaded_model(args, moe_top_k=args.moe_top_k)
    engines = {name: Engine(lambda: loaded, config).start() for name, config in configs.items()}
    result = provenance(args, loaded)
    result["single"] = measured(lambda: run_single(loaded, engines, prompts(loaded, args.prompt_tokens, 1)[0], args))
    for c in sizes:
        result[f"concurrency_{c}"] = measured(lambda: run_batch(loaded, engines, c, args))
    result["loads"] = LOADS  # the load variants' settings, and the GIL share each busy thread achieved
    result["speculation"] = {name: e.stats()["speculative"] for name, e in engines.items()
                             if e.stats()["speculative"].get("active")}  # drafts, acceptance, measured rates
    for engine in engines.values():
        engine.shutdown()
    print(json.dumps(result, indent=2) if args.json else human(result))
    return 0


def measured(run) -> dict:
    """``run()``'s result with MLX's peak memory during it, also written to stderr at once (a
    run cut short by a time limit keeps the levels it finished)."""
    import mlx.core as mx

    mx.reset_peak_memory()
    res = run()
    res["peak_memory_bytes"] = mx.get_peak_memory()
    print(json.dumps(res), file=sys.stderr, flush=True)
    return res


def provenance(args, loaded) -> dict:
    import mlx.core as mx
    import mlx_lm

    return {"model": loaded.name, "dtype": args.dtype, "prompt_tokens": args.prompt_tokens,
            "max_tokens": args.max_tokens, "temperature": args.temperature, "reps": args.reps,
            "device": str(mx.default_device()),
            "mlx": mx.__version__, "mlx_lm": mlx_lm.__version__, "machine": platform.machine(),
            "command": " ".join(sys.argv)}


def human(r: dict) -> str:
    lines = [f"model {r['model']} ({r['dtype']}) on {r['device']}, mlx {r['mlx']}, mlx-lm {r['mlx_lm']}, "
             f"{r['max_tokens']} new tokens, median of {r['reps']}"]
    for key, res in r.items():
        if isinstance(res, dict) and "median_tps" in res:
            figures = ", ".join(f"{k} {v:.1f}" for k, v in res["median_tps"].items())
            ratios = ", ".join(f"{k} {v:.3f}" for k, v in res["ratios"].items())
            extra = f", greedy identical: {res['greedy_tokens_identical']}" if "greedy_tokens_identical" in res else ""
            lines.append(f"{key}: tok/s {figures} | ratios {ratios}{extra}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
