"""One rank of a tensor-parallel job (or a lone process), run by tests/distributed/test_lockstep.py.

Usage: python -m tests.distributed.tp_worker N MODEL OUT.json [dummy]
Rank 0 submits a fixed mix of requests (greedy, seeded and unseeded sampling, a JSON schema,
a stop string, one aborted mid-way, a prefix-cache hit) and writes what came back to OUT.json.
"""

from __future__ import annotations

import json
import os
import sys
import threading

from mlxctl.distributed.group import tensor_group
from mlxctl.engine.constraints import ConstraintSpec
from mlxctl.engine.engine import EngineConfig
from mlxctl.engine.sampling import SamplingParams
from mlxctl.generation import PromptSpec, generate, open_engine

SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}}, "required": ["city"],
          "additionalProperties": False}
SYSTEM = ("You are a careful assistant. " * 40).strip()  # long enough to fill prefix-cache blocks
PROMPTS = [
    ("What is the capital of France?", SamplingParams(max_tokens=16, temperature=0)),
    ("Write a haiku about the sea.", SamplingParams(max_tokens=16, temperature=0.8, seed=7)),
    ("Name a city.", SamplingParams(max_tokens=40, temperature=0,
                                    constraint=ConstraintSpec("json_schema", json.dumps(SCHEMA)))),
    ("Count: one, two, three,", SamplingParams(max_tokens=24, temperature=0, stop=(",",))),
    ("Tell me a story.", SamplingParams(max_tokens=12, temperature=1.0)),  # unseeded: rank 0 picks a seed
]


def _fault(step: int):
    def hook(n: int) -> None:
        if n == step:
            raise RuntimeError("injected fault")

    return hook


def main() -> None:
    ranks, model, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    group = tensor_group(ranks, "run")
    fault_rank, _, fault_step = os.environ.get("TP_FAULT", "").partition(":")  # RANK:STEP, tests of failures
    hook = _fault(int(fault_step)) if fault_rank and group is not None and group.rank() == int(fault_rank) else None
    engine = open_engine(model, group=group, load_format=sys.argv[4] if len(sys.argv) > 4 else "auto",
                         config=EngineConfig(fault_hook=hook))
    if group is not None and group.rank() != 0:
        engine.wait()
        with open(f"{out}.rank{group.rank()}", "w") as f:
            json.dump({"stats": engine.stats().get("tensor_parallel")}, f)
        return
    if os.environ.get("TP_FAULT"):  # a failure test: one request, what became of it
        try:
            outcome = {"text": generate(engine, PromptSpec(PROMPTS[0][0]), PROMPTS[0][1]).collect().text}
        except Exception as exc:  # noqa: BLE001 - the error the client would see
            outcome = {"error": str(exc)}
        with open(out, "w") as f:
            json.dump(outcome, f)
        threading.Event().wait()  # for ever: only the job being stopped ends it (exit 70, mlx.launch the rest)
        return
    streams = [generate(engine, PromptSpec(text), params) for text, params in PROMPTS]
    aborted = generate(engine, PromptSpec("Say many words."), SamplingParams(max_tokens=400, temperature=0))
    next(iter(aborted))  # one token, then the client goes away
    aborted.abort()
    results = [s.collect() for s in streams]
    first = generate(engine, PromptSpec("Hi.", system=SYSTEM), PROMPTS[0][1]).collect()
    again = generate(engine, PromptSpec("Hello.", system=SYSTEM), PROMPTS[0][1]).collect()  # a prefix-cache hit
    record = {
        "texts": [r.text for r in results],
        "tokens": [list(r.token_ids) for r in results],
        "finish": [str(r.finish_reason) for r in results],
        "again": [first.text, again.text],
        "cached": again.usage.cached_tokens,
        "aborted": str(aborted.collect().finish_reason),
        "stats": engine.stats().get("tensor_parallel"),
    }
    engine.shutdown()
    with open(out, "w") as f:
        json.dump(record, f)


if __name__ == "__main__":
    main()
