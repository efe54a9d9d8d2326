"""A run's numbers from its request results: latencies, throughputs, goodput and failures."""

from __future__ import annotations

from collections import Counter
from typing import Any

from mlxctl.bench.result import RequestResult
from mlxctl.bench.slo import Slo
from mlxctl.bench.stats import summarize


def run_metrics(results: list[RequestResult], duration: float, slo: Slo) -> dict[str, Any]:
    """Every number the report shows for one run (times in seconds, rates per second)."""
    done = [r for r in results if r.ok]
    return {
        "requests": len(results),
        "completed": len(done),
        "failed": len(results) - len(done),
        "failures": failures_by_kind(results),
        "failure_examples": failure_examples(results),
        "duration_s": duration,
        **throughputs(done, duration),
        **latencies(done),
        **token_counts(done),
        **goodput(results, duration, slo),
    }


def failures_by_kind(results: list[RequestResult]) -> dict[str, int]:
    """http_<status>, timeout, connection, stream_error, and contract (checks that failed)."""
    kinds = Counter(r.error_kind for r in results if not r.ok)
    kinds["contract"] = sum(1 for r in results if r.ok and r.check_failures)
    return {kind: count for kind, count in sorted(kinds.items()) if count}


def failure_examples(results: list[RequestResult]) -> dict[str, str]:
    """The first message of each kind of failure, so a report says why and not only how often."""
    examples: dict[str, str] = {}
    for r in results:
        if not r.ok:
            examples.setdefault(r.error_kind or "error", r.error or "")
        elif r.check_failures:
            examples.setdefault("contract", f"{r.name}: {'; '.join(r.check_failures)}")
    return examples


def throughputs(done: list[RequestResult], duration: float) -> dict[str, float | None]:
    if duration <= 0:
        return {"request_throughput": None, "output_throughput": None, "total_token_throughput": None}
    output = sum(r.output_tokens for r in done)
    prompt = sum(r.prompt_tokens or 0 for r in done)
    return {
        "request_throughput": len(done) / duration,
        "output_throughput": output / duration,
        "total_token_throughput": (output + prompt) / duration,
    }


def latencies(done: list[RequestResult]) -> dict[str, dict]:
    return {
        "ttft": summarize([r.ttft for r in done if r.ttft is not None]),
        "tpot": summarize([r.tpot for r in done if r.tpot is not None]),
        "itl": summarize([gap for r in done for gap in r.itl]),
        "e2e": summarize([r.e2e for r in done if r.e2e is not None]),
    }


def token_counts(done: list[RequestResult]) -> dict[str, Any]:
    """Token counts seen: the server's usage where it gave one, else chunks counted."""
    prompts = [r.prompt_tokens for r in done if r.prompt_tokens is not None]
    return {
        "prompt_tokens_mean": sum(prompts) / len(prompts) if prompts else None,
        "output_tokens_mean": sum(r.output_tokens for r in done) / len(done) if done else None,
        "output_tokens_from": _token_source(done),
        "fixed_output_length": bool(done) and all(r.ignore_eos_sent and r.output_tokens == r.max_tokens for r in done),
    }


def _token_source(done: list[RequestResult]) -> str | None:
    sources = {"usage" if r.completion_tokens is not None else "chunks" for r in done}
    return sources.pop() if len(sources) == 1 else ("mixed" if sources else None)


def goodput(results: list[RequestResult], duration: float, slo: Slo) -> dict[str, Any]:
    """Requests per second that succeeded, passed their checks and met every SLO, and their
    share of all requests (both None without --slo)."""
    if not slo.as_dict():
        return {"goodput": None, "good_fraction": None}
    good = sum(1 for r in results if r.passed_checks and slo.met_by(r.ttft, r.tpot, r.e2e))
    return {"goodput": good / duration if duration > 0 else None, "good_fraction": good / len(results) if results else None}
