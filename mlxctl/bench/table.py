"""The report for people: the servers, a table of runs, and the workload's case verdicts."""

from __future__ import annotations

import io

from rich import box
from rich.console import Console
from rich.table import Table

from mlxctl.bench.report import Report, RunRecord

RUN_COLUMNS = ("server", "shape", "rep", "ok", "req/s", "out tok/s", "TTFT p50", "TTFT p99",
               "TPOT p50", "ITL p99", "E2E p50", "goodput", "out tok/s vs A")


def render_report(report: Report, *, color: bool = False, width: int = 160) -> str:
    """Rich tables on a terminal (``color``), plain aligned columns otherwise."""
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=color, no_color=not color, width=width, highlight=False)
    for line in _server_lines(report):
        console.print(line, markup=False)
    console.print(_runs_table(report, color))
    if report.cases:
        console.print(_cases_table(report, color))
    for line in _notes(report):
        console.print(line, markup=False)
    return buffer.getvalue().rstrip("\n")


def _server_lines(report: Report) -> list[str]:
    return [f"{s.label}: {s.url}  model={s.model}" + (f"  server={s.server_header}" if s.server_header else "") for s in report.servers]


def _table(color: bool, *columns: str, text_columns: int = 2) -> Table:
    """Text in the first ``text_columns`` columns (left-aligned), numbers after them."""
    table = Table(box=box.SIMPLE_HEAD if color else None, show_edge=False, pad_edge=False)
    for index, name in enumerate(columns):
        table.add_column(name, justify="left" if index < text_columns else "right")
    return table


def _runs_table(report: Report, color: bool) -> Table:
    columns = RUN_COLUMNS if len(report.servers) > 1 else RUN_COLUMNS[:-1]
    table = _table(color, *columns)
    for run in report.runs:
        table.add_row(*_run_cells(run)[: len(columns)])
    return table


def _run_cells(run: RunRecord) -> list[str]:
    m = run.metrics
    ratio = (run.vs_first or {}).get("output_throughput")
    return [
        run.label, run.shape.label(), str(run.repeat + 1), f"{m['completed']}/{m['requests']}",
        _num(m["request_throughput"], ".2f"), _num(m["output_throughput"], ".1f"),
        _ms(m["ttft"]["p50"]), _ms(m["ttft"]["p99"]), _ms(m["tpot"]["p50"]), _ms(m["itl"]["p99"]),
        _num(m["e2e"]["p50"], ".2f", " s"), _num(m["goodput"], ".2f", "/s"), _num(ratio, ".2f", "x"),
    ]


def _cases_table(report: Report, color: bool) -> Table:
    table = _table(color, "server", "case", "result", "why", text_columns=4)
    for case in report.cases:
        verdict = "pass" if case.passed else "FAIL"
        table.add_row(case.label, case.case, verdict, "; ".join(case.failures)[:120])
    return table


def _notes(report: Report) -> list[str]:
    notes = [f"{s.label} refused {', '.join(s.refused_fields)}: sent without; outputs were not fixed-length"
             for s in report.servers if s.refused_fields]
    notes += _failure_notes(report)
    if report.cases:
        notes.append(f"checks: {len(report.cases) - len(report.failed_cases)}/{len(report.cases)} cases passed")
    return notes


def _failure_notes(report: Report) -> list[str]:
    """Failures per server and kind over every run, with the first message of each."""
    counts: dict[tuple[str, str], int] = {}
    examples: dict[tuple[str, str], str] = {}
    for run in report.runs:
        for kind, count in run.metrics["failures"].items():
            counts[run.label, kind] = counts.get((run.label, kind), 0) + count
            examples.setdefault((run.label, kind), run.metrics["failure_examples"].get(kind, ""))
    return [f"failures: {label} {kind}: {count} (first: {examples[label, kind][:100]})" for (label, kind), count in counts.items()]


def _ms(seconds: float | None) -> str:
    return _num(None if seconds is None else seconds * 1000, ".1f", " ms")


def _num(value: float | None, spec: str, unit: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{unit}"
