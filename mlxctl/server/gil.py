"""The daemon's GIL switch interval.

The event loop and the engine thread share one interpreter lock. The loop gives it up at every
socket write and while a prompt is tokenized (both release the GIL), and then waits to take it
back while the engine thread runs Python (building a step's graph): CPython lets a waiting
thread in only after its switch interval, 5 ms by default. A py-spy profile of the daemon at 64
streams on an H100 (scripts/gpu_profile_serve.sh, docs/benchmarks.md) found the loop's samples
in those two places, tokens reaching clients late and prompts reaching the engine late. A
shorter interval hands the lock back sooner; the engine thread loses little, as it gives the
lock up itself whenever it waits for the device.

``MLXCTL_SWITCH_INTERVAL_MS`` overrides the interval (CPython's own default is 5); the
interval is the process's, set while the server runs and restored after.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from mlxctl.errors import BadInputError

SWITCH_INTERVAL_MS = 0.5
ENV = "MLXCTL_SWITCH_INTERVAL_MS"


def switch_interval_s(environ: Mapping[str, str] = os.environ) -> float:
    """The interval to serve with, in seconds: ``MLXCTL_SWITCH_INTERVAL_MS`` or the default."""
    raw = environ.get(ENV, "").strip()
    if not raw:
        return SWITCH_INTERVAL_MS / 1000
    try:
        ms = float(raw)
    except ValueError:
        ms = float("nan")
    if not 0 < ms <= 1000:  # (NaN fails too)
        raise BadInputError(f"{ENV}={raw!r}: give the GIL switch interval in milliseconds, above 0 and at most 1000",
                            hint=f"unset it for the default, {SWITCH_INTERVAL_MS} ms")
    return ms / 1000


@contextmanager
def serving_switch_interval(environ: Mapping[str, str] = os.environ) -> Iterator[float]:
    """Set the process's switch interval for the server's life; restore the old one after."""
    seconds = switch_interval_s(environ)
    before = sys.getswitchinterval()
    sys.setswitchinterval(seconds)
    try:
        yield seconds
    finally:
        sys.setswitchinterval(before)
