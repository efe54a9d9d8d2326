"""The one place that decides and applies MLX's wired memory limit (Metal only).

On Apple GPUs the OS may page out unified memory the GPU reads; when model weights or the KV
cache get paged, decoding stalls and GPU use drops (users of servers that do not wire memory
report ~30% GPU use). ``mx.set_wired_limit`` asks the OS to keep that many bytes resident.
mlx-lm's server wires the whole recommended working set and never restores it; here the limit is
what the loaded models and the KV budget need, capped to the recommended working set, and the
previous limit is restored at exit. CUDA and CPU have no wired memory: everything is a no-op.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self

import mlx.core as mx
from mlx.utils import tree_reduce

log = logging.getLogger("mlxctl.engine")

GiB = 1 << 30
WORKING_SET = "max_recommended_working_set_size"  # mx.device_info() key, present on Metal only


def backend(core: Any = mx) -> str:
    """Which MLX backend is usable: ``"metal"``, ``"cuda"`` or ``"cpu"`` (``core``: for tests).

    Each probe is guarded: a build without a backend may lack the module or ``is_available``."""
    for name in ("metal", "cuda"):
        try:
            if getattr(core, name).is_available():
                return name
        except AttributeError:
            continue
    return "cpu"


def wired_limit_bytes(need_bytes: int, device: dict[str, Any], backend: str) -> int | None:
    """The wired limit to set, or None to leave it alone (not Metal, or no recommended size).

    ``need_bytes`` is the loaded models' weights plus the KV budget; the result is that, capped
    to the device's recommended working set (wiring more than the system limit is an error in
    MLX). ``need_bytes <= 0`` (unknown) wires the recommended working set, as mlx-lm does."""
    recommended = device.get(WORKING_SET) if backend == "metal" else None
    if not recommended:
        return None
    return recommended if need_bytes <= 0 else min(need_bytes, recommended)


def over_working_set(need_bytes: int, device: dict[str, Any], backend: str) -> str | None:
    """A warning when the models and KV need more than the recommended working set, else None.

    Past that size the OS pages part of them whatever is wired, so decoding will be slow; the
    caller says so once instead of letting the server look merely slow."""
    recommended = wired_limit_bytes(0, device, backend)
    if recommended is None or need_bytes <= recommended:
        return None
    return (
        f"the models and KV need {need_bytes / GiB:.1f} GiB, more than the recommended working set "
        f"{recommended / GiB:.1f} GiB; wiring {recommended / GiB:.1f} GiB"
    )


def model_bytes(model: Any) -> int:
    """Bytes of the ``mx.array`` leaves of ``model`` (an ``nn.Module`` or a tree): its weights."""
    return tree_reduce(lambda acc, x: acc + x.nbytes if isinstance(x, mx.array) else acc, model, 0)


class WiredLimit:
    """Sets the wired limit once for a server's lifetime and puts the previous one back.

    The mx calls are constructor arguments so tests can drive the Metal path on any machine.
    Use as a context manager (``with WiredLimit() as wired: wired.apply(need)``) or call
    ``restore`` at shutdown; ``restore`` synchronises first because MLX's wired limit must not
    change under a running async eval (mlx-lm's ``wired_limit`` does the same)."""

    def __init__(
        self,
        setter: Callable[[int], int] = mx.set_wired_limit,
        info: Callable[[], dict[str, Any]] = mx.device_info,
        backend: Callable[[], str] = backend,
        sync: Callable[[], None] = mx.synchronize,
    ) -> None:
        self._setter, self._info, self._backend, self._sync = setter, info, backend, sync
        self._previous: int | None = None  # the limit before the first apply; None: nothing to restore
        self.limit: int | None = None  # what apply set last

    def apply(self, need_bytes: int) -> int | None:
        """Wire what ``need_bytes`` calls for; return the limit set, or None where nothing was done.

        Applying again (a model loaded later) changes the limit but keeps the original previous
        value, so ``restore`` returns to what the process had before the server started."""
        name = self._backend()
        if name != "metal":  # device_info is not even asked: nothing to wire off Metal
            return None
        device = self._info()
        limit = wired_limit_bytes(need_bytes, device, name)
        if limit is None:
            return None
        if warning := over_working_set(need_bytes, device, name):
            log.warning(warning)
        previous = self._setter(limit)
        if self._previous is None:
            self._previous = previous
        self.limit = limit
        log.info("wired memory limit %.1f GiB (Metal; restored at exit)", limit / GiB)
        return limit

    def restore(self) -> None:
        """Set the limit back to what it was before ``apply``; a no-op when already restored."""
        if self._previous is None:
            return
        previous, self._previous, self.limit = self._previous, None, None
        self._sync()
        self._setter(previous)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.restore()


_PROCESS = WiredLimit()  # one wired limit for the process: every engine's share adds to it
_SHARES: dict[int, int] = {}
_SHARES_LOCK = threading.Lock()


def hold(key: int, need: Callable[[], int]) -> int | None:
    """An engine's share (its weights and KV, ``need()``, asked for on Metal only) joins the
    process's wired limit; returns the limit now set (None off Metal)."""
    if _PROCESS._backend() != "metal":
        return None
    with _SHARES_LOCK:
        _SHARES[key] = need()
        return _PROCESS.apply(sum(_SHARES.values()))


def release(key: int) -> None:
    """An engine stops: its share leaves the limit; the last one out restores the previous limit."""
    with _SHARES_LOCK:
        if _SHARES.pop(key, None) is None:
            return
        if _SHARES:
            _PROCESS.apply(sum(_SHARES.values()))
        else:
            _PROCESS.restore()
