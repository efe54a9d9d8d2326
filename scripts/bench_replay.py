#!/usr/bin/env python3
"""What undoing a rejected draft costs: trimming (attention caches) against restoring and replaying
(recurrent state), in the engine, one request (issue 19).

  python scripts/bench_replay.py [--hidden 512] [--layers 8] [--max-tokens 96] [--draft 4] [--reps 3] [--batch N]

Two random-weight models of the same size: a llama (every layer attention: a rejected draft is
cut off the cache) and a Qwen3.5-style hybrid (linear-attention layers with recurrent state and a
full-attention layer every fourth: the state is restored and brought forward over the kept
tokens). For each, greedy decoding without speculation, then with drafts taken from that plain
reply: all right ("right": nothing to undo), and with the third token of every draft wrong
("wrong": two kept, the rest undone each step, by the recurrent mixers alone; "wrong-whole": by
running the kept tokens through the whole model, the engine's way before mixer replay). The
drafts are fed to the engine's ngram proposer, so everything
else is the product's path. Prints decode tok/s per round (interleaved), the medians, and the
replies' agreement with the plain one.

With ``--batch N`` N requests run at once (each its own prompt; speculation allowed for N rows)
and the rate is all their tokens over the wall time. "wrong" then gets row r's draft wrong at
position 1 + r % (draft - 1), so the rows keep different counts every step: the undo by the
mixers alone, each row told its length, against the whole model right-padded ("wrong-whole").
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

VOCAB = 4096


def configs(hidden: int, layers: int) -> dict:
    heads, dim = max(2, hidden // 64), 64
    return {
        "llama": dict(model_type="llama", hidden_size=hidden, num_hidden_layers=layers, intermediate_size=2 * hidden,
                      num_attention_heads=heads, num_key_value_heads=max(1, heads // 4), rms_norm_eps=1e-5,
                      vocab_size=VOCAB, tie_word_embeddings=True, max_position_embeddings=4096),
        "qwen3_5": dict(model_type="qwen3_5", text_config=dict(
            model_type="qwen3_5_text", hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
            num_attention_heads=heads, num_key_value_heads=max(1, heads // 4), head_dim=dim, vocab_size=VOCAB,
            linear_num_value_heads=heads, linear_num_key_heads=max(1, heads // 2), linear_key_head_dim=dim,
            linear_value_head_dim=dim, linear_conv_kernel_dim=4, full_attention_interval=4,
            max_position_embeddings=4096, tie_word_embeddings=True)),
    }


class Letters:
    """Token i decodes to one letter: all the engine's detokenizer needs of random weights."""

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(ord("a") + i % 26) for i in ids)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--draft", type=int, default=4)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--batch", type=int, default=1, help="requests at once (rows keep different counts)")
    args = p.parse_args()
    if args.layers < 4:
        p.error("--layers must be at least 4: the hybrid model has one attention layer in four")

    from mlxctl.engine import speculative
    from mlxctl.engine.engine import Engine, EngineConfig
    from mlxctl.engine.prefix_config import PrefixConfig
    from mlxctl.engine.sampling import SamplingParams
    from mlxctl.engine.speculative import SpeculationConfig
    from mlxctl.models.dummy import build_model
    from mlxctl.models.loader import LoadedModel

    prompts = [[(7 * i + 13 * r) % 97 + 3 for i in range(64)] for r in range(args.batch)]
    params = SamplingParams(temperature=0, max_tokens=args.max_tokens)
    plain_replies: list[list[int]] = []
    wrong = [False]

    def propose(self, history, k):  # the plain reply's next tokens; one wrong if asked
        for r, (prompt, reply) in enumerate(zip(prompts, plain_replies)):
            if history[:len(prompt)] == prompt:
                draft = list(reply[len(history) - len(prompt):][:k])
                at = 2 if args.batch == 1 else 1 + r % max(1, args.draft - 1)
                if wrong[0] and len(draft) > at:
                    draft[at] = (draft[at] + 1) % VOCAB
                return draft
        return []

    def run(engine):  # (tok/s, the replies)
        t0 = time.perf_counter()
        done = [s.collect() for s in [engine.submit(p, params) for p in prompts]]
        if args.batch == 1:
            return done[0].timings.decode_tps, [list(done[0].token_ids)]
        return sum(len(d.token_ids) for d in done) / (time.perf_counter() - t0), [list(d.token_ids) for d in done]

    speculative.NgramProposer.propose = propose
    speculative.NgramProposer.likely = lambda self, prompt, generated: True  # every step drafts
    off = EngineConfig(prefix=PrefixConfig(enabled=False))
    on = EngineConfig(prefix=PrefixConfig(enabled=False), speculation=SpeculationConfig(
        "ngram", args.draft, max_rows=args.batch, measured=False))
    whole = EngineConfig(prefix=PrefixConfig(enabled=False), speculation=SpeculationConfig(
        "ngram", args.draft, max_rows=args.batch, measured=False, mixer_replay=False))
    result = {}
    for arch, config in configs(args.hidden, args.layers).items():
        def load(config=config, arch=arch):  # on the engine's thread (its stream), the same seed for both engines
            return LoadedModel(build_model(config), Letters(), config, 4096, set(), arch)

        engines = {"off": Engine(load, off).start(), "spec": Engine(load, on).start(),
                   "whole": Engine(load, whole).start()}
        plain_replies[:] = run(engines["off"])[1]
        for name in ("spec", "whole"):  # warm-up, both draft kinds
            for w in (False, True):
                wrong[0] = w
                run(engines[name])
        rates = {"off": [], "right": [], "wrong": [], "wrong-whole": []}
        same = {"right": True, "wrong": True, "wrong-whole": True}
        steps = {}
        for _ in range(args.reps):
            for label, engine, w in (("off", engines["off"], False), ("right", engines["spec"], False),
                                     ("wrong", engines["spec"], True), ("wrong-whole", engines["whole"], True)):
                wrong[0] = w
                before = engine.stats()["speculative"] if label != "off" else None
                tps, replies = run(engine)
                rates[label].append(round(tps, 1))
                if label != "off":
                    same[label] &= replies == plain_replies
                    after = engine.stats()["speculative"]
                    steps[label] = {k: after[k] - before[k] for k in ("draft_tokens", "accepted_tokens")}
        for engine in engines.values():
            engine.shutdown()
        med = {k: statistics.median(v) for k, v in rates.items()}
        result[arch] = {"tok_s": rates, "median": med, "right_vs_off": round(med["right"] / med["off"], 2),
                        "wrong_vs_off": round(med["wrong"] / med["off"], 2),
                        "wrong_vs_right": round(med["wrong"] / med["right"], 2),
                        "wrong_whole_vs_off": round(med["wrong-whole"] / med["off"], 2), "same_reply": same,
                        "last_round_counts": steps}
        print(arch, json.dumps(result[arch]), flush=True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
