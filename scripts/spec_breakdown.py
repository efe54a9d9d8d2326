"""Where a speculating reply's tokens come from, and what bounds its speed (issue 19).

  python scripts/spec_breakdown.py [--model REF] [--dtype auto] [--prompt edit|transcript]
         [--draft 8] [--max-tokens 200] [--reps 3]

One request at a time, greedy, on one loaded model, through three engines interleaved A B C:
without speculation (``off``), with ``--speculative ngram`` as shipped (``policy``: the
measured policy decides when a step checks a draft) and speculating whenever a draft is likely
(``always``). Prints each engine's decode tok/s per round (after a warm-up round) and its
decode steps, and, from a step trace of ``always``: how many tokens came from checked drafts
and how many from plain steps, with the speed-up over ``off`` those counts allow if a check
costs one plain step and if it costs ``--check-cost`` steps (1.45: SmolLM2 on an H100,
docs/benchmarks.md). Replies must be identical to ``off``'s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=None)
    p.add_argument("--dtype", default="auto")
    p.add_argument("--prompt", choices=("edit", "transcript"), default="edit")
    p.add_argument("--draft", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=200)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--check-cost", type=float, default=1.45)
    args = p.parse_args()
    if args.reps < 1 or args.max_tokens < 2:
        p.error("--reps must be at least 1 and --max-tokens at least 2")

    from bench_speculative import repeat_prompt, transcript_prompt

    from mlxctl.engine.engine import Engine, EngineConfig
    from mlxctl.engine.sampling import SamplingParams
    from mlxctl.engine.speculative import SpeculationConfig
    from mlxctl.engine.step_trace import ENV
    from mlxctl.generation import model_loader

    loaded = model_loader(args.model, args.dtype, lambda m: print(m, file=sys.stderr))()
    prompt = repeat_prompt(loaded.tokenizer, 200) if args.prompt == "edit" else \
        transcript_prompt(loaded.tokenizer, ROOT / "docs/workloads/agent_transcript.json")
    configs = {"off": SpeculationConfig(), "policy": SpeculationConfig("ngram", args.draft),
               "always": SpeculationConfig("ngram", args.draft, measured=False)}
    engines = {name: Engine(lambda: loaded, EngineConfig(speculation=config)).start()
               for name, config in configs.items()}
    params = SamplingParams(temperature=0.0, max_tokens=args.max_tokens)
    rates: dict[str, list[float]] = {name: [] for name in engines}
    reference = None
    try:
        for rep in range(args.reps + 1):
            for name, engine in engines.items():
                out = engine.submit(prompt, params).collect()
                reference = reference or out.token_ids
                if out.token_ids != reference:
                    raise SystemExit(f"{name}: the reply differs from off's")
                if rep:
                    rates[name].append(round((len(out.token_ids) - 1) / out.timings.decode_s, 1))
        steps = {name: e.stats()["speculative"].get("decode_steps") for name, e in engines.items()}
    finally:
        for engine in engines.values():
            engine.shutdown()
    trace = Path(tempfile.mkdtemp()) / "always.jsonl"  # one more reply, traced step by step (read at start)
    os.environ[ENV] = str(trace)
    traced = Engine(lambda: loaded, EngineConfig(speculation=configs["always"])).start()
    os.environ.pop(ENV)
    try:
        traced.submit(prompt, params).collect()
    finally:
        traced.shutdown()
    last = [json.loads(line) for line in trace.read_text().splitlines()]
    decode = [s for s in last if not s["prefill_tokens"]]
    checks, plain = [s for s in decode if s["spec"]], [s for s in decode if not s["spec"]]
    tokens = sum(s["emitted"] for s in decode)
    print(json.dumps({
        "prompt": args.prompt, "draft": args.draft, "reply_tokens": len(reference),
        "decode_tok_s": rates, "median": {k: statistics.median(v) for k, v in rates.items()},
        "decode_steps": steps,
        "always_traced_reply": {"checks": len(checks), "tokens_from_checks": sum(s["emitted"] for s in checks),
                              "plain_steps": len(plain), "tokens_from_plain_steps": sum(s["emitted"] for s in plain)},
        "bound_vs_off_check_costs_1_step": round(tokens / (len(plain) + len(checks)), 2),
        f"bound_vs_off_check_costs_{args.check_cost}_steps": round(tokens / (len(plain) + args.check_cost * len(checks)), 2),
    }, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
