#!/usr/bin/env python3
"""Time to first token of a long shared prefix, cold and cached, over HTTP, servers interleaved.

  python scripts/ttft_prefix.py --url http://127.0.0.1:8080 [--url http://127.0.0.1:8081]
         [-m NAME ...] [--prefix-tokens 16000] [--reps 3] [--json]

Each repetition makes a new system prompt of about --prefix-tokens tokens (random words, so no
server has seen it) and sends, to each server in turn: the system prompt with one question
(cold: nothing of it can be cached) and then the same system prompt with another question
(cached: everything up to the end of the system prompt can be reused). TTFT is the time to the
first streamed chunk that carries text or a finish reason; the prompt's size and cached tokens
come from the usage the server reports (when it does). Prints medians per server and the
cached/cold ratio.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time

WORDS = ("agent file test change branch commit review build error module function value request "
         "server cache token model prompt stream batch layer window state reply tool call result").split()


def system_prompt(rng: random.Random, tokens: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(tokens))


def timed_request(client, model: str, system: str, question: str) -> dict:
    """One streamed chat completion (SSE read as it comes): TTFT, prompt and cached tokens."""
    body = {"model": model, "max_tokens": 2, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}]}
    t0 = time.perf_counter()
    ttft, usage = None, {}
    with client.stream("POST", "/v1/chat/completions", json=body) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[len("data: "):])
            choice = (chunk.get("choices") or [{}])[0]
            if ttft is None and ((choice.get("delta") or {}).get("content") or choice.get("finish_reason")):
                ttft = time.perf_counter() - t0
            usage = chunk.get("usage") or usage
    details = usage.get("prompt_tokens_details") or {}
    return {"ttft_s": ttft if ttft is not None else time.perf_counter() - t0,
            "prompt_tokens": usage.get("prompt_tokens"), "cached_tokens": details.get("cached_tokens") or 0}


def main() -> int:
    import httpx

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", action="append", required=True)
    p.add_argument("-m", "--model", action="append", help="one per --url (default: each server's first model)")
    p.add_argument("--prefix-tokens", type=int, default=16000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    clients = [httpx.Client(base_url=u.rstrip("/"), timeout=900) for u in args.url]
    models = args.model or [c.get("/v1/models").json()["data"][0]["id"] for c in clients]
    rng = random.Random(args.seed)
    rows: dict[str, list[dict]] = {u: [] for u in args.url}
    warm = system_prompt(rng, 256)
    for client, model in zip(clients, models):  # kernels for the shapes, before anything is measured
        timed_request(client, model, warm, "warm up")
    for rep in range(args.reps):
        system = system_prompt(rng, args.prefix_tokens)
        for url, client, model in zip(args.url, clients, models):
            cold = timed_request(client, model, system, f"Question {rep}: which file first?")
            cached = timed_request(client, model, system, f"Question {rep}: which test next?")
            rows[url].append({"rep": rep, "cold": cold, "cached": cached})
    summary = []
    for url, model in zip(args.url, models):
        cold = statistics.median(r["cold"]["ttft_s"] for r in rows[url])
        cached = statistics.median(r["cached"]["ttft_s"] for r in rows[url])
        summary.append({"url": url, "model": model, "cold_ttft_s": cold, "cached_ttft_s": cached,
                        "cached_over_cold": cached / cold if cold else None,
                        "cold_range_s": [min(r["cold"]["ttft_s"] for r in rows[url]), max(r["cold"]["ttft_s"] for r in rows[url])],
                        "cached_range_s": [min(r["cached"]["ttft_s"] for r in rows[url]), max(r["cached"]["ttft_s"] for r in rows[url])],
                        "prompt_tokens": rows[url][-1]["cached"]["prompt_tokens"],
                        "cached_tokens": rows[url][-1]["cached"]["cached_tokens"]})
    if args.json:
        print(json.dumps({"summary": summary, "runs": rows}, indent=2))
    else:
        for s in summary:
            print(f"{s['url']} {s['model']}: prompt {s['prompt_tokens']} tokens, cached {s['cached_tokens']}; "
                  f"TTFT cold {s['cold_ttft_s'] * 1000:.0f} ms, cached {s['cached_ttft_s'] * 1000:.0f} ms "
                  f"({s['cached_over_cold']:.2f}x), median of {args.reps}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
