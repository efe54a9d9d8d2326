"""Several models in one daemon: lazy loading, a memory budget, leases, idle unloading.

The primary model (``serve -m``, the first one) is loaded at start and pinned. Every other model
named with ``serve -m NAME=REF`` (or ``-m REF``) is loaded when a request first names it, on a
thread of its own, so requests to models already resident go on meanwhile. A request holds a
lease on its model until its response is written; a leased model is never unloaded. After a
load, if the models' weights exceed ``--max-loaded-gb``, the least recently used models that
are neither leased nor pinned are unloaded. A model unused for its keep-alive (``--keep-alive``,
or Ollama's per-request ``keep_alive``: seconds, "5m", "1h", 0 = unload when idle, -1 = never)
is unloaded by a reaper. A name that is not configured is a 404: nothing is ever downloaded
because a request body said so.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mlxctl.errors import BadInputError

log = logging.getLogger("mlxctl.server")

STATES = ("unloaded", "loading", "ready", "failed")


def parse_keep_alive(value: Any, what: str = "keep_alive") -> float | None:
    """Seconds (None: forever). Numbers are seconds; strings like "30s", "5m", "2h"; -1 forever."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise BadInputError(f"{what} must be a duration like 300, \"5m\" or -1, got {value!r}")
    if isinstance(value, (int, float)):
        return None if value < 0 else float(value)
    match = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*", str(value))
    if not match:
        raise BadInputError(f"{what} must be a duration like 300, \"5m\" or -1, got {value!r}")
    number = float(match.group(1))
    if number < 0:
        return None
    return number * {"ms": 0.001, "s": 1, None: 1, "m": 60, "h": 3600}[match.group(2)]


@dataclass
class Resident:
    name: str
    ref: str
    make_engine: Callable[[], Any]  # a fresh, unstarted engine for this model
    pinned: bool = False
    keep_alive_s: float | None = 300.0
    engine: Any = None
    state: str = "unloaded"
    leases: int = 0
    last_used: float = field(default_factory=time.monotonic)
    nbytes: int = 0
    error: str | None = None
    loads: int = 0
    _loading: asyncio.Future | None = None

    def describe(self) -> dict:
        idle = time.monotonic() - self.last_used
        return {"id": self.name, "ref": self.ref, "state": self.state, "pinned": self.pinned,
                "in_use": self.leases, "weights_bytes": self.nbytes, "idle_s": round(idle, 1),
                "keep_alive_s": self.keep_alive_s, "loads": self.loads, "error": self.error}


class ModelPool:
    def __init__(self, budget_bytes: int = 0, default_keep_alive_s: float | None = 300.0):
        self.budget_bytes = budget_bytes  # 0: no limit
        self.default_keep_alive_s = default_keep_alive_s
        self.models: dict[str, Resident] = {}

    def add(self, name: str, ref: str, make_engine: Callable[[], Any], *, pinned: bool = False,
            engine: Any = None) -> Resident:
        if name in self.models:
            raise BadInputError(f"two models are served as {name!r}", hint="name them with -m NAME=REF")
        resident = Resident(name, ref, make_engine, pinned, self.default_keep_alive_s, engine)
        if engine is not None and engine.model is not None:
            resident.state, resident.nbytes = "ready", weights_bytes(engine)
        self.models[name] = resident
        return resident

    def get(self, name: str) -> Resident | None:
        return self.models.get(name)

    async def lease(self, name: str, keep_alive: Any = None) -> Resident:
        """The model, loaded; the caller must ``release`` it when its response is done."""
        resident = self.models[name]
        if keep_alive is not None:
            resident.keep_alive_s = parse_keep_alive(keep_alive)
        resident.leases += 1
        try:
            await self.load(name)
        except BaseException:
            resident.leases -= 1
            raise
        resident.last_used = time.monotonic()
        return resident

    def release(self, resident: Resident) -> None:
        resident.leases = max(0, resident.leases - 1)
        resident.last_used = time.monotonic()

    async def load(self, name: str) -> Resident:
        resident = self.models[name]
        if resident.state == "ready":
            return resident
        if resident._loading is None:
            resident._loading = asyncio.ensure_future(self._load(resident))
        await asyncio.shield(resident._loading)
        return resident

    async def _load(self, resident: Resident) -> None:
        resident.state, resident.error = "loading", None
        engine = resident.make_engine()
        try:
            await asyncio.to_thread(engine.start)  # never blocks requests to other models
        except Exception as exc:
            resident.state, resident.error = "failed", getattr(exc, "message", str(exc))
            resident._loading = None
            raise
        resident.engine, resident.state = engine, "ready"
        resident.nbytes, resident.loads = weights_bytes(engine), resident.loads + 1
        resident._loading = None
        log.info("model %s loaded (%d MB of weights)", resident.name, resident.nbytes >> 20)
        await self.enforce_budget(keep=resident)

    async def unload(self, name: str, *, force: bool = False) -> bool:
        """Unload a model no request holds (pinned ones only with ``force``); False if it could not."""
        resident = self.models[name]
        if resident.state != "ready" or resident.leases or (resident.pinned and not force):
            return False
        engine, resident.engine, resident.state, resident.nbytes = resident.engine, None, "unloaded", 0
        await asyncio.to_thread(_shutdown, engine)
        log.info("model %s unloaded", resident.name)
        return True

    async def enforce_budget(self, keep: Resident | None = None) -> list[str]:
        """Unload least recently used idle models until the weights fit the budget."""
        evicted = []
        while self.budget_bytes and self.loaded_bytes > self.budget_bytes:
            idle = [r for r in self.models.values()
                    if r.state == "ready" and not r.leases and not r.pinned and r is not keep]
            if not idle:
                break
            victim = min(idle, key=lambda r: r.last_used)
            if await self.unload(victim.name):
                evicted.append(victim.name)
        return evicted

    async def reap(self) -> list[str]:
        """Unload models idle past their keep-alive."""
        now, gone = time.monotonic(), []
        for r in list(self.models.values()):
            if (r.state == "ready" and not r.pinned and not r.leases and r.keep_alive_s is not None
                    and now - r.last_used >= r.keep_alive_s and await self.unload(r.name)):
                gone.append(r.name)
        return gone

    async def reaper(self, every_s: float = 1.0) -> None:
        while True:
            await asyncio.sleep(every_s)
            try:
                await self.reap()
            except Exception:  # noqa: BLE001 - the reaper must outlive any one failure
                log.exception("idle unload failed")

    @property
    def loaded_bytes(self) -> int:
        return sum(r.nbytes for r in self.models.values() if r.state == "ready")

    def describe(self) -> list[dict]:
        return [r.describe() for r in self.models.values()]

    async def close(self) -> None:
        for r in self.models.values():
            if r.engine is not None and not r.pinned:
                await asyncio.to_thread(_shutdown, r.engine)
                r.engine, r.state = None, "unloaded"


def _shutdown(engine: Any) -> None:
    engine.shutdown()
    import mlx.core as mx

    mx.clear_cache()


def weights_bytes(engine: Any) -> int:
    from mlx.utils import tree_flatten

    model = getattr(getattr(engine, "model", None), "model", None)
    if model is None:
        return 0
    return sum(v.nbytes for _, v in tree_flatten(model.parameters()))
