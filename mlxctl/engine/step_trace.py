"""``MLXCTL_STEP_TRACE=FILE``: one JSON line per engine step, for finding where a run's time went.

A diagnostic, off unless the variable names a file (appended to; one engine a process should
write it). Each line: ``t`` (seconds since the engine's first step started), ``dt`` (the step's
wall time: the host's work plus its waits for the device), ``idle`` (since the previous step
ended: waiting for requests, housekeeping), ``rows`` (decode rows at the step's start),
``prefill_tokens`` and ``prefill_reqs`` (prompt work planned this step), ``joined`` (prompts that
joined the decode batch), ``emitted`` (tokens the step emitted), ``spec`` (a speculative
step) and ``width`` (the tokens a row fed to the decode pass: 1 for a plain step, the pending
token and the drafts for a check, 0 with no rows; the decode pass's shape is rows by width)
and ``kv`` (the positions the batch's caches held a row as the step started, padding included:
what its attention spans). ``scripts/step_trace.py`` sums a file up; the same run in process and
behind the daemon then show whether the daemon's steps are more, longer or further apart.
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any

log = logging.getLogger("mlxctl.engine")
ENV = "MLXCTL_STEP_TRACE"
FLUSH_EVERY = 256  # lines held before they are written


class StepTrace:
    def __init__(self, path: str) -> None:
        self.path = path
        self._lines: list[str] = []
        self._origin: float | None = None
        self._last_end: float | None = None

    @classmethod
    def from_env(cls) -> "StepTrace | None":
        path = os.environ.get(ENV, "").strip()
        return cls(path) if path else None

    def record(self, start: float, rows: int, plan_prefill: list[tuple[Any, int]], joined: int, emitted: int,
               speculative: bool, width: int = 1, kv: int = 0) -> None:
        if not self.path:  # stopped: the file could not be written
            return
        end = time.perf_counter()
        if self._origin is None:
            self._origin = start
        idle = 0.0 if self._last_end is None else max(0.0, start - self._last_end)
        self._last_end = end
        self._lines.append(json.dumps({
            "t": round(start - self._origin, 6), "dt": round(end - start, 6), "idle": round(idle, 6),
            "rows": rows, "prefill_tokens": sum(n for _, n in plan_prefill), "prefill_reqs": len(plan_prefill),
            "joined": joined, "emitted": emitted, "spec": speculative,
            "width": width if rows else 0, "kv": kv}))
        if len(self._lines) >= FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        """Write the lines held; a file that cannot be written ends the trace with one warning
        (a diagnostic must not fail the steps it watches)."""
        if self._lines and self.path:
            try:
                with open(self.path, "a", encoding="utf-8") as f:
                    f.write("\n".join(self._lines) + "\n")
            except OSError as exc:
                log.warning("%s: cannot write %s (%s); the step trace stops", ENV, self.path, exc)
                self.path = ""
        self._lines.clear()
