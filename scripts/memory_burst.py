#!/usr/bin/env python3
"""A burst of requests whose KV reservations exceed a running daemon's memory budget (issue 20).

  python scripts/memory_burst.py --url http://127.0.0.1:8080 --model NAME [--requests 200]
         [--prompt-tokens 512] [--max-tokens 60000] [--read-chunks 4]

Fires --requests streamed chat completions at once, each reserving its prompt plus --max-tokens
of KV; each admitted one is read for --read-chunks chunks and then closed (the server cancels it,
so the burst tests admission without decoding 60k tokens a request). Prints JSON: the status
codes, the error codes of the refusals, whether each 503 carried Retry-After, the budget as
`/v1/status` reports it during and after the burst, and whether the daemon still answers a plain
request afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import random

import httpx


def prompt(i: int, words: int) -> str:
    rng = random.Random(i)
    return " ".join(rng.choice(("alpha", "beta", "gamma", "delta", "omega", "sigma")) for _ in range(words))


async def one(client: httpx.AsyncClient, args, i: int) -> dict:
    body = {"model": args.model, "stream": True, "max_tokens": args.max_tokens,
            "messages": [{"role": "user", "content": prompt(i, args.prompt_tokens)}]}
    async with client.stream("POST", "/v1/chat/completions", json=body) as r:
        if r.status_code != 200:
            text = (await r.aread()).decode()
            try:
                code = json.loads(text)["error"].get("code")
            except (ValueError, KeyError, AttributeError):
                code = text[:80]
            return {"status": r.status_code, "code": code, "retry_after": r.headers.get("retry-after")}
        chunks = 0
        async for line in r.aiter_lines():
            if line.startswith("data:"):
                chunks += 1
                if chunks >= args.read_chunks:
                    break
        return {"status": 200, "chunks": chunks}


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8080")
    p.add_argument("--model", required=True)
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--prompt-tokens", type=int, default=512, help="about this many words of prompt")
    p.add_argument("--max-tokens", type=int, default=60000)
    p.add_argument("--read-chunks", type=int, default=4)
    args = p.parse_args()
    limits = httpx.Limits(max_connections=args.requests + 8)
    async with httpx.AsyncClient(base_url=args.url, timeout=600, limits=limits) as client:
        before = (await client.get("/v1/status")).json().get("engine", {}).get("memory")
        tasks = [asyncio.create_task(one(client, args, i)) for i in range(args.requests)]
        await asyncio.sleep(0)
        during = None
        while not all(t.done() for t in tasks):  # the budget as the burst fills it
            during = (await client.get("/v1/status")).json().get("engine", {}).get("memory") or during
            await asyncio.wait(tasks, timeout=0.5)
        results = [t.result() for t in tasks]
        after_req = await client.post("/v1/chat/completions", json={
            "model": args.model, "max_tokens": 8, "messages": [{"role": "user", "content": "hello"}]})
        after = (await client.get("/v1/status")).json().get("engine", {}).get("memory")
    statuses = collections.Counter(r["status"] for r in results)
    codes = collections.Counter(r.get("code") for r in results if r["status"] != 200)
    print(json.dumps({
        "requests": args.requests, "prompt_words": args.prompt_tokens, "max_tokens": args.max_tokens,
        "statuses": dict(statuses), "refusal_codes": dict(codes),
        "503_with_retry_after": sum(1 for r in results if r["status"] == 503 and r.get("retry_after")),
        "memory_before": before, "memory_during": during, "memory_after": after,
        "plain_request_after": after_req.status_code,
    }, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
