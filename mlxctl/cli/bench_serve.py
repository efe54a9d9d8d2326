"""`mlxctl bench-serve`: benchmark OpenAI-compatible servers over HTTP (see docs/bench-serve.md)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated, Optional

import typer

from mlxctl.cli.context import output_for
from mlxctl.cli.options import DEFAULT_URL
from mlxctl.cli.output import Output
from mlxctl.errors import CheckFailedError

Ints = Annotated[Optional[list[str]], typer.Option(metavar="N[,N...]", show_default=False)]


def bench_serve(
    ctx: typer.Context,
    url: Annotated[Optional[list[str]], typer.Option("--url", metavar="URL", help=f"Base URL of a server (repeat to compare servers, interleaved; ratios are against the first) [default: {DEFAULT_URL}].", show_default=False)] = None,
    endpoint: Annotated[str, typer.Option("--endpoint", metavar="chat|completions", help="Which API to call.")] = "chat",
    model: Annotated[Optional[list[str]], typer.Option("--model", "-m", metavar="NAME", help="Model name to request; repeat to give one per --url (default: the first id in each server's /v1/models).", show_default=False)] = None,
    api_key: Annotated[Optional[str], typer.Option("--api-key", metavar="KEY", help="Bearer token sent to every server.", show_default=False)] = None,
    prompt_tokens: Annotated[Optional[list[str]], typer.Option("--prompt-tokens", metavar="N[,N...]", help="Synthetic prompt lengths in tokens (about; the server's count is reported) [default: 128].", show_default=False)] = None,
    output_tokens: Annotated[Optional[list[str]], typer.Option("--output-tokens", metavar="N[,N...]", help="Output lengths in tokens (max_tokens) [default: 128].", show_default=False)] = None,
    concurrency: Annotated[Optional[list[str]], typer.Option("--concurrency", "-c", metavar="N[,N...]", help="Requests in flight at once, swept [default: 1]; with --request-rate, a cap.", show_default=False)] = None,
    request_rate: Annotated[Optional[list[str]], typer.Option("--request-rate", metavar="R[,R...]", help="Send requests as Poisson arrivals at R per second instead of a closed loop; 'inf' sends all at once.", show_default=False)] = None,
    num_requests: Annotated[Optional[int], typer.Option("--num-requests", "-n", metavar="N", min=1, help="Requests per measured run (default: 4 per concurrency slot, at least 8; 32 by rate; each case once with --workload).", show_default=False)] = None,
    warmup: Annotated[Optional[int], typer.Option("--warmup", metavar="N", min=0, help="Warm-up requests per shape and server, not measured (default: one per concurrency slot).", show_default=False)] = None,
    repeats: Annotated[int, typer.Option("--repeats", metavar="N", min=1, help="Measure each shape N times per server.")] = 1,
    slo: Annotated[Optional[str], typer.Option("--slo", metavar="SPEC", help="Bounds in seconds for goodput, e.g. ttft=0.5,tpot=0.05,e2e=10.", show_default=False)] = None,
    ignore_eos: Annotated[bool, typer.Option("--ignore-eos/--no-ignore-eos", help="Ask for fixed-length outputs (ignore_eos); dropped for a server that refuses it.")] = True,
    timeout: Annotated[float, typer.Option("--timeout", metavar="SECONDS", help="Give up on a request after this long.")] = 300.0,
    seed: Annotated[int, typer.Option("--seed", metavar="N", help="Seed for synthetic prompts and arrival times.")] = 0,
    workload: Annotated[Optional[Path], typer.Option("--workload", metavar="FILE", help="A JSON or YAML contract file of cases with checks; exits 7 if any case fails.", show_default=False)] = None,
    json_: Annotated[bool, typer.Option("--json", help="Print one JSON document: provenance, servers, runs, cases.")] = False,
    csv: Annotated[Optional[Path], typer.Option("--csv", metavar="FILE", help="Also write one CSV row per measured run to FILE.", show_default=False)] = None,
) -> None:
    """Benchmark running OpenAI-compatible servers (ours, mlx-lm, llama.cpp, vLLM).

    Sweeps prompt and output lengths by concurrency or request rate and reports TTFT, TPOT,
    inter-token latency, end-to-end latency, throughput and goodput; with --workload, checks
    each reply against its case and exits 7 if one fails.
    """
    out = output_for(ctx, json=json_)
    config = _config(**locals())
    report = _run(out, config)
    _show(out, report, csv)
    if report.failed_cases:
        failed = len(report.failed_cases)
        raise CheckFailedError(f"{failed} of {len(report.cases)} workload cases failed their checks",
                               hint="the report lists why; run with --json for the replies")


def _run(out, config):
    """The run with a live bar of runs and requests on a terminal; lines otherwise."""
    from mlxctl.bench.bench import run_bench
    from mlxctl.bench.progress import Bar

    if not out.shows_progress:
        return run_bench(config, progress=out.progress)
    with Bar(out.stderr) as bar:
        return run_bench(config, progress=bar.message, bar=bar)


def _config(url, endpoint, model, api_key, prompt_tokens, output_tokens, concurrency, request_rate,
            num_requests, warmup, repeats, slo, ignore_eos, timeout, seed, workload, **_):
    from mlxctl.bench.config import BenchConfig, parse_list, parse_url
    from mlxctl.bench.slo import Slo, parse_slo

    rates = parse_list("--request-rate", request_rate, float)
    slots = parse_list("--concurrency", concurrency, int)
    return BenchConfig(
        urls=tuple(parse_url(u) for u in (url or [DEFAULT_URL])), endpoint=endpoint, models=tuple(model or ()), api_key=api_key,
        prompt_tokens=parse_list("--prompt-tokens", prompt_tokens, int, (128,)),
        output_tokens=parse_list("--output-tokens", output_tokens, int, (128,)),
        concurrency=slots or (1,), request_rates=rates,
        max_concurrency=max(slots) if rates and slots else None,
        num_requests=num_requests, warmup=warmup, repeats=repeats,
        slo=parse_slo(slo) if slo is not None else Slo(), ignore_eos=ignore_eos, timeout=timeout, seed=seed,
        workload=workload,
    )


def _show(out: Output, report, csv_path: Path | None) -> None:
    from mlxctl.bench.csv_report import write_csv
    from mlxctl.bench.table import render_report

    if csv_path is not None:
        write_csv(report, csv_path)
        out.message(f"wrote {csv_path}")
    color = not out.is_json and _isatty(out.stdout)
    width = shutil.get_terminal_size((160, 24)).columns if color else 200
    out.data(report.as_dict(), human=None if out.is_json else render_report(report, color=color, width=width))


def _isatty(stream) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
