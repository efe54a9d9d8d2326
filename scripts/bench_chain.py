"""Chained speculative checks against checks read one at a time, on a host-bound model (issue 19).

  python scripts/bench_chain.py [--layers 2] [--hidden 64] [--max-tokens 400] [--reps 5] [--draft 8]

A tiny random-weight llama (tests/engine/tiny.py: vocabulary 64) falls into a loop that prompt
lookup copies whole, so nearly every check is taken whole and chains. With few layers a pass
costs the host more than the arithmetic, as a small model's does on a GPU: the case chaining
is for. Three engines on one loaded model, interleaved A B C per round after a warm-up reply:
without speculation, ``ngram`` with checks chained (``SpeculationConfig.chain`` on: the default
on a GPU), and ``ngram`` with each check read before the next is queued (``chain`` off: the
default on the CPU backend). Prints decode tok/s per round,
the chain counters, and whether each reply equals the one without speculation.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=400)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--draft", type=int, default=8)
    args = p.parse_args()

    from mlxctl.engine.engine import Engine, EngineConfig
    from mlxctl.engine.sampling import SamplingParams
    from mlxctl.engine.speculative import SpeculationConfig
    from tests.engine.tiny import TinyModel, tiny_llama

    loaded = TinyModel(model=tiny_llama(layers=args.layers, hidden=args.hidden))
    prompt = [1, 2, 3, 4, 1, 2, 3, 4, 1, 2]
    configs = {"off": SpeculationConfig(), "chained": SpeculationConfig("ngram", args.draft, chain=True),
               "unchained": SpeculationConfig("ngram", args.draft, chain=False)}
    engines = {name: Engine(lambda: loaded, EngineConfig(speculation=c)).start() for name, c in configs.items()}
    params = SamplingParams(temperature=0, max_tokens=args.max_tokens)
    replies = {name: engine.submit(prompt, params).collect().token_ids for name, engine in engines.items()}
    rates: dict[str, list[float]] = {name: [] for name in engines}
    for _ in range(args.reps):
        for name, engine in engines.items():
            done = engine.submit(prompt, params).collect()
            rates[name].append(done.timings.decode_tps)
            replies[name] = replies[name] if done.token_ids == replies[name] else ()
    print(f"tiny llama, {args.layers} layers, hidden {args.hidden}: {args.max_tokens} new tokens, {args.reps} rounds")
    for name, engine in engines.items():
        chained = engine.stats()["speculative"].get("chained_checks")
        print(f"  {name:>9}: {statistics.median(rates[name]):8.1f} tok/s {[round(r) for r in rates[name]]}  "
              f"chained checks {chained}  same reply as off: {replies[name] == replies['off']}")
        engine.shutdown()
    pairs = [c / u for c, u in zip(rates["chained"], rates["unchained"])]
    print(f"  chained / unchained per round: {[round(r, 2) for r in pairs]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
