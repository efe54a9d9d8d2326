"""Speculative decoding against plain decoding, one request, in one process (issue 19).

  python scripts/bench_speculative.py [--model REF] [--dtype auto] [--code-tokens 200]
         [--max-tokens 200] [--reps 3] [--draft 8[,4,...]] [--grow] [--chain-ab]
         [--draft-model REF [--draft-dtype native]]
         [--batch N] [--transcript docs/workloads/agent_transcript.json] [--json]

The prompt asks the model to repeat about --code-tokens tokens of this repository's source
(the edit-like case prompt lookup feeds on). Each round runs the engine without speculation,
then with ``--speculative ngram`` (fixed drafts: ``--no-grow-drafts``; and ``draft``, given --draft-model) at each --draft size, greedy, on the same loaded model,
interleaved A B C A B C; decode tok/s is the engine's own (first token to finish); one request is
also run through mlx-lm's bare ``generate_step`` loop in each round (``speedup_vs_bare``). With --batch N,
N requests go at once (each repeating another part of the code) and the rate is all their
tokens over the wall time. Every speculative reply is compared with the plain one, token for
token. With --transcript the prompt is instead the last turn of a recorded agent session (the
history an agent sends, tool calls and results as text). Each engine's warm-up is one whole
round (with --batch, the batch), so the pass widths and row counts it meets are compiled before
the rounds (on an H100 a batch of 8's first round spent most of its time building them). The
rounds' prompts are the warm-up's, so from the first round on the prefix cache holds them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None)
    p.add_argument("--dtype", default="auto")
    p.add_argument("--code-tokens", type=int, default=200, help="about how much code the prompt asks to repeat")
    p.add_argument("--max-tokens", type=int, default=200)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--draft", default="8", help="comma-separated --num-draft-tokens values")
    p.add_argument("--grow", action="store_true",
                   help="also ngram with growing drafts (a draft taken whole doubles the next; --grow-drafts: "
                        "in batches too) at each --draft size")
    p.add_argument("--chain-ab", action="store_true",
                   help="also ngram with checks chained and with each check read before the next is queued "
                        "(SpeculationConfig.chain on and off; off by default, MLXCTL_CHAIN_CHECKS=1), at each --draft size")
    p.add_argument("--draft-model", default=None, help="also --speculative draft with this model, at each --draft size")
    p.add_argument("--draft-dtype", default="auto")
    p.add_argument("--batch", type=int, default=1,
                   help="requests at once, each asked to repeat another part of the code (1: one request)")
    p.add_argument("--transcript", type=Path, default=None,
                   help="instead of the code prompt: the last turn of a recorded agent transcript "
                        "(docs/workloads/agent_transcript.json), tool calls and results flattened to text")
    p.add_argument("--json", action="store_true")
    return p.parse_args()


def repeat_prompt(tokenizer, code_tokens: int, part: int = 0) -> list[int]:
    """The chat prompt asking to repeat ``code_tokens`` tokens of batch.py, from ``part`` times
    that many tokens into ``class DecodeBatch``."""
    from mlxctl.api.prompt import chat_messages, render_chat

    source = (ROOT / "mlxctl" / "engine" / "batch.py").read_text()
    ids = tokenizer.encode(source[source.index("class DecodeBatch"):], add_special_tokens=False)
    code = tokenizer.decode(ids[part * code_tokens:(part + 1) * code_tokens])
    return render_chat(tokenizer, chat_messages("Repeat this code exactly, with no changes:\n\n" + code))


def transcript_prompt(tokenizer, path: Path) -> list[int]:
    """The whole history before the transcript's last assistant turn, as an agent would send it;
    tool calls and tool results become plain text so any chat template renders them."""
    from mlxctl.api.prompt import render_chat

    transcript = json.loads(path.read_text())
    history = [{"role": "system", "content": transcript["system"]}] if transcript.get("system") else []
    last = []
    for message in transcript["messages"]:
        if message["role"] == "assistant":
            last = list(history)
        text = message.get("content") or ""
        if message.get("tool_calls"):
            text += "".join("\n" + json.dumps(call.get("function", call)) for call in message["tool_calls"])
        role = "user" if message["role"] == "tool" else message["role"]
        history.append({"role": role, "content": ("Tool result:\n" if message["role"] == "tool" else "") + text})
    return render_chat(tokenizer, last)


def main() -> int:
    args = parse()
    from mlxctl.engine.engine import Engine, EngineConfig
    from mlxctl.engine.sampling import SamplingParams
    from mlxctl.engine.speculative import SpeculationConfig
    from mlxctl.generation import model_loader

    loaded = model_loader(args.model, args.dtype, lambda m: print(m, file=sys.stderr))()
    if args.transcript:
        prompts = [transcript_prompt(loaded.tokenizer, args.transcript)] * args.batch
    else:
        prompts = [repeat_prompt(loaded.tokenizer, args.code_tokens, part) for part in range(args.batch)]
    prompt = prompts[0]
    configs = {"off": SpeculationConfig()}
    configs.update({f"ngram{k}": SpeculationConfig("ngram", int(k), grow=False) for k in args.draft.split(",")})
    if args.grow:
        configs.update({f"ngram{k}+": SpeculationConfig("ngram", int(k), grow=True) for k in args.draft.split(",")})
    if args.chain_ab:
        for k in args.draft.split(","):
            configs.update({f"ngram{k}c": SpeculationConfig("ngram", int(k), chain=True),
                            f"ngram{k}-": SpeculationConfig("ngram", int(k), chain=False)})
    if args.draft_model:
        configs.update({f"draft{k}": SpeculationConfig("draft", int(k), args.draft_model, args.draft_dtype)
                        for k in args.draft.split(",")})
    params = SamplingParams(temperature=0, max_tokens=args.max_tokens)
    engines = {name: Engine(lambda: loaded, EngineConfig(speculation=c)) for name, c in configs.items()}
    for name, engine in engines.items():  # MLXCTL_STEP_TRACE=F: a file per engine, F.<name>
        if engine.trace is not None:
            engine.trace.path += f".{name}"
        engine.start()
    for engine in engines.values():  # warm-up: a whole round (the batch's too), so the shapes it meets are built
        for stream in [engine.submit(p, params) for p in prompts]:
            stream.collect()
    rates: dict[str, list[float]] = {name: [] for name in engines}
    accepted: dict[str, list[float]] = {name: [] for name in engines}
    replies: dict[str, set] = {name: set() for name in engines}
    bare: list[float] = []
    for _ in range(args.reps):
        if args.batch == 1:  # mlx-lm's own loop, the baseline of "x times a plain decode"
            sys.path.insert(0, str(ROOT / "scripts"))
            from bench_engine import bare_generate_step

            bare.append(bare_generate_step(loaded, prompt, args.max_tokens)[1])
        for name, engine in engines.items():
            start = time.perf_counter()
            done = [s.collect() for s in [engine.submit(p, params) for p in prompts]]
            wall = time.perf_counter() - start
            # one request: its own decode rate; a batch: every token of every request over the wall time
            rates[name].append(done[0].timings.decode_tps if args.batch == 1 else
                               sum(d.usage.completion_tokens for d in done) / wall)
            drafted = sum(d.timings.draft_tokens for d in done)
            accepted[name].append(sum(d.timings.accepted_tokens for d in done) / drafted if drafted else 0.0)
            replies[name].add(tuple(d.token_ids for d in done))
    # what each engine's policy measured (check cost per batch size, decode steps of each kind)
    policy = {name: {k: engine.stats()["speculative"].get(k) for k in ("tokens_per_s", "decode_steps")}
              for name, engine in engines.items() if name != "off"}
    for engine in engines.values():
        engine.shutdown()
    base = statistics.median(rates["off"])
    loop = statistics.median(bare) if bare else None
    result = {"model": loaded.name, "prompt_tokens": len(prompt), "max_tokens": args.max_tokens, "reps": args.reps,
              "batch": args.batch, "generate_step_tps": [round(r, 1) for r in bare],
              "runs": {name: {"decode_tps": [round(r, 1) for r in rates[name]],
                              "median_tps": round(statistics.median(rates[name]), 1),
                              "speedup": round(statistics.median(rates[name]) / base, 2),
                              "speedup_vs_bare": round(statistics.median(rates[name]) / loop, 2) if loop else None,
                              "acceptance": round(statistics.median(accepted[name]), 3),
                              "same_reply_as_off": replies[name] == replies["off"]} for name in engines},
              "policy": policy}
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(f"{result['model']}: {len(prompt)}-token prompt, {args.max_tokens} new tokens, {args.reps} rounds, "
              f"{args.batch} request(s) at once")
        if bare:
            print(f"  generate_step: {statistics.median(bare):7.1f} tok/s {result['generate_step_tps']}")
        for name, r in result["runs"].items():
            print(f"  {name:>8}: {r['median_tps']:7.1f} tok/s {r['decode_tps']}  x{r['speedup']} (x{r['speedup_vs_bare']} "
                  "of generate_step)  "
                  f"accepted {r['acceptance']:.0%}  same reply: {r['same_reply_as_off']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
