"""The runs as CSV: one row per measured run, nested numbers flattened (``ttft_p50``)."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from mlxctl.bench.report import Report
from mlxctl.errors import BadInputError


def csv_rows(report: Report) -> list[dict[str, Any]]:
    rows = []
    for run in report.runs:
        row = {"label": run.label, "url": run.url, **run.shape.as_dict(), "repeat": run.repeat}
        row |= _flat(run.metrics)
        row |= {f"vs_first_{key}": value for key, value in (run.vs_first or {}).items()}
        rows.append(row)
    return rows


def csv_text(report: Report) -> str:
    rows = csv_rows(report)
    columns = list(dict.fromkeys(key for row in rows for key in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def write_csv(report: Report, path: Path) -> None:
    try:
        path.write_text(csv_text(report), encoding="utf-8")
    except OSError as exc:
        raise BadInputError(f"cannot write {path}: {exc.strerror}") from None


def _flat(metrics: dict[str, Any]) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in metrics.items():
        if key == "failures":
            flat |= {f"failures_{kind}": count for kind, count in value.items()}
        elif isinstance(value, dict):
            flat |= {f"{key}_{stat}": number for stat, number in value.items() if stat != "count"}
        else:
            flat[key] = value
    return flat
