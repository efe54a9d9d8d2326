"""Several models in one daemon: lazy loading, a memory budget, leases, idle unloading.

The primary model (``serve -m``, the first one) is loaded at start and pinned; with
``--no-pin-primary`` it joins the pool (``add_primary``): unloaded when idle past its keep-alive
or to make room, as any pool model, by putting its engine to sleep, and woken by the next request
that names it. Every other model
named with ``serve -m NAME=REF`` (or ``-m REF``, or in ``--models-config``) is loaded when a
request first names it, on a thread of its own, so requests to models already resident go on
meanwhile. A request holds a lease on its model until its response is written; a leased model
is never unloaded.

The budget (``--max-loaded-gb``) counts every loaded model's weights, the pinned primary's too
(``outside``). It is kept before a load, not after: when the new model's weights
can be estimated from its headers (``mlxctl model inspect``'s reader), the least recently used
models that are neither leased nor pinned are unloaded until it fits, then it is loaded; when it
cannot fit even so, the load is refused with a 507 (or a 503 with Retry-After while the room is
held by models in use) that says why. After a load the budget is checked again (estimates can
be off; some models cannot be estimated).

A model unused for its keep-alive (``--keep-alive``, or Ollama's per-request ``keep_alive``:
seconds, "5m", "1h", 0 = unload when idle, -1 = never) is unloaded by a reaper. A name that is
not configured is a 404, so nothing is ever downloaded because a request body said so, unless
the operator passed ``--allow-unconfigured-models``: then ``unconfigured(name)`` (given by
``serve``) decides whether the name is one a request may load (catalog chat models and Hugging
Face repo ids, never local paths) and the model joins the pool as if configured.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mlxctl.errors import BadInputError, MlxctlError, ModelNotFoundError
from mlxctl.server.errors import ApiError

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
    # the bytes of weights loading it will take, read from its headers before loading (None:
    # cannot tell); runs on a worker thread, and may fetch the model into the store first
    estimate: Callable[[], int | None] | None = None
    estimated_bytes: int | None = None
    reserved: int = 0  # budget held for it while it loads
    configured: bool = True  # False: added because a request named it (--allow-unconfigured-models)
    sampling: Any = None  # its --models-config sampling defaults (a SamplingDefaults); None: none
    sleeps: bool = False  # the primary model (--no-pin-primary): unloading puts its engine to sleep
    _loading: asyncio.Future | None = None

    def describe(self) -> dict:
        idle = time.monotonic() - self.last_used
        return {"id": self.name, "ref": self.ref, "state": self.state, "pinned": self.pinned,
                "in_use": self.leases, "weights_bytes": self.nbytes, "estimated_bytes": self.estimated_bytes,
                "idle_s": round(idle, 1), "keep_alive_s": self.keep_alive_s, "loads": self.loads,
                "configured": self.configured, "error": self.error}


# (make_engine, estimate) for a model a request named, or BadInputError saying why it may not
Unconfigured = Callable[[str], tuple[Callable[[], Any], Callable[[], int | None] | None]]

_KEEP = object()  # add(): the pool's default keep-alive


class ModelPool:
    def __init__(self, budget_bytes: int = 0, default_keep_alive_s: float | None = 300.0,
                 unconfigured: Unconfigured | None = None):
        self.budget_bytes = budget_bytes  # 0: no limit
        self.default_keep_alive_s = default_keep_alive_s
        self.unconfigured = unconfigured  # None: a name that is not configured is not served
        self.models: dict[str, Resident] = {}
        self.outside: Callable[[], int] = lambda: 0  # weights held outside the pool: a pinned primary's
        self.ledger: Any = None  # --memory-budget-gb's, shared by every engine (engine/memory.py)

    def add(self, name: str, ref: str, make_engine: Callable[[], Any], *, pinned: bool = False,
            engine: Any = None, keep_alive_s: Any = _KEEP,
            estimate: Callable[[], int | None] | None = None, sampling: Any = None) -> Resident:
        if name in self.models:
            raise BadInputError(f"two models are served as {name!r}", hint="name them with -m NAME=REF")
        keep = self.default_keep_alive_s if keep_alive_s is _KEEP else keep_alive_s
        resident = Resident(name, ref, make_engine, pinned, keep, engine, estimate=estimate, sampling=sampling)
        if engine is not None and engine.model is not None:
            resident.state, resident.nbytes = "ready", weights_bytes(engine)
        self.models[name] = resident
        return resident

    def add_primary(self, name: str, engine: Any) -> Resident:
        """``serve --no-pin-primary``: the primary model joins the pool. Its engine stays the
        server's: unloading puts it to sleep (engine/sleep.py) and loading wakes it."""
        resident = self.add(name, name, lambda: engine, engine=engine)
        resident.sleeps, resident.loads = True, int(resident.state == "ready")  # ready: already loaded
        return resident

    def started(self, name: str) -> None:
        """The primary model's first load is done (the server loads it at start)."""
        resident = self.models.get(name)
        if resident is not None and resident.sleeps and resident.state == "unloaded":
            resident.state, resident.nbytes, resident.loads = "ready", weights_bytes(resident.engine), 1
            resident.last_used = time.monotonic()

    def get(self, name: str) -> Resident | None:
        return self.models.get(name)

    def admit(self, name: str) -> str | None:
        """Make ``name`` a pool model if it is not one and unconfigured models are allowed.

        None once it is one; else why not ("" when the server serves only what is configured).
        Nothing is fetched or loaded here: that happens on the lease, like any lazy load."""
        if name in self.models:
            return None
        if self.unconfigured is None:
            return ""
        try:
            make_engine, estimate = self.unconfigured(name)
        except MlxctlError as err:
            return err.message
        self.add(name, name, make_engine, estimate=estimate).configured = False
        log.info("model %s added to the pool at a request's asking", name)
        return None

    async def lease(self, name: str, keep_alive: Any = None) -> Resident:
        """The model, loaded; the caller must ``release`` it when its response is done."""
        resident = self.models.get(name)
        if resident is None:  # a model a request added, dropped after its load failed
            raise ModelNotFoundError(f"model '{name}' is no longer served")
        if keep_alive is not None:
            resident.keep_alive_s = parse_keep_alive(keep_alive)
        resident.leases += 1
        self.watch_memory()
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
        try:
            if resident.estimate is not None:  # on a thread: it may fetch the model first
                resident.estimated_bytes = await asyncio.to_thread(resident.estimate)
            if resident.estimated_bytes:
                resident.reserved = resident.estimated_bytes
                await self.make_room(resident, resident.estimated_bytes)
            engine = resident.make_engine()
            await asyncio.to_thread(engine.wake if resident.sleeps else engine.start)  # never blocks other models' requests
        except Exception as exc:
            resident.reserved, resident._loading = 0, None
            resident.state = "unloaded" if isinstance(exc, ApiError) else "failed"
            resident.error = getattr(exc, "message", str(exc))
            if not resident.configured and resident.state == "failed":
                self.models.pop(resident.name, None)  # requests cannot fill the pool with failures
            raise
        resident.engine, resident.state, resident.reserved = engine, "ready", 0
        resident.nbytes, resident.loads = weights_bytes(engine), resident.loads + 1
        resident._loading = None
        log.info("model %s loaded (%d MB of weights)", resident.name, resident.nbytes >> 20)
        await self.enforce_budget(keep=resident)

    async def make_room(self, resident: Resident, need: int) -> list[str]:
        """Unload least recently used idle models until ``need`` more bytes fit the budget; an
        ApiError (507, or 503 while models in use hold the room) when they cannot."""
        if not self.budget_bytes and self.ledger is None:
            return []
        for flag, total, pinned, holder in self._budgets():
            if need > total:
                raise ApiError(507, f"model '{resident.name}' needs about {_gb(need)} of weights, more than the "
                                    f"whole {flag} budget ({_gb(total)})", code="model_too_large")
            if need + pinned > total:
                raise ApiError(507, f"model '{resident.name}' needs about {_gb(need)} of weights and {holder} "
                                    f"{_gb(pinned)} of the {flag} budget ({_gb(total)})", code="model_budget_full")
        evicted: list[str] = []
        while (flag := self._over(resident, need)) is not None:
            if (victim := self._least_used_idle(besides=resident)) is None:
                raise self._no_room(resident, need, flag)
            if not await self.unload(victim.name):  # cannot happen: it was idle just now
                raise self._no_room(resident, need, flag)
            evicted.append(victim.name)
            log.info("model %s unloaded to make room for %s", victim.name, resident.name)
        return evicted

    def _budgets(self) -> list[tuple[str, int, int, str]]:
        """(flag, bytes, what pinned models hold of it, who those are) for each budget set."""
        shares = []
        if self.budget_bytes:
            shares.append(("--max-loaded-gb", self.budget_bytes, self.outside(), "the pinned primary model holds"))
        if self.ledger is not None:
            shares.append(("--memory-budget-gb", self.ledger.total, self.ledger.fixed_besides(0),
                           "the pinned models hold"))
        return shares

    def _least_used_idle(self, besides: Resident | None = None) -> Resident | None:
        """The least recently used model that could be unloaded now (ready, unpinned, unleased)."""
        idle = [r for r in self.models.values()
                if r.state == "ready" and not r.leases and not r.pinned and r is not besides]
        return min(idle, key=lambda r: r.last_used) if idle else None

    def _over(self, resident: Resident, need: int) -> str | None:
        """The budget ``need`` more bytes would overflow ("--max-loaded-gb": weights;
        "--memory-budget-gb": weights, prefix caches and the KV of requests in flight), or None."""
        if self.budget_bytes and self._committed(resident) + need > self.budget_bytes:
            return "--max-loaded-gb"
        if self.ledger is not None:
            loading = sum(r.reserved for r in self.models.values() if r is not resident and r.state == "loading")
            if self.ledger.used() + loading + need > self.ledger.total:
                return "--memory-budget-gb"
        return None

    def _committed(self, resident: Resident | None = None) -> int:
        """Bytes of weights loaded (the pinned primary's too), and held for models loading,
        besides ``resident``'s."""
        return self.outside() + sum(r.nbytes if r.state == "ready" else r.reserved
                                    for r in self.models.values() if r is not resident and r.state in ("ready", "loading"))

    def _no_room(self, resident: Resident, need: int, flag: str = "--max-loaded-gb") -> ApiError:
        holders = [r for r in self.models.values()
                   if r is not resident and r.state in ("ready", "loading") and (r.nbytes or r.reserved)]
        busy = [r for r in holders if r.leases or r.state == "loading"]
        held = ", ".join([*([f"the primary model {_gb(primary)} (pinned)"] if (primary := self.outside()) else []),
                          *(f"'{r.name}' {_gb(r.nbytes or r.reserved)} ({_why_held(r)})" for r in holders)])
        total = self.budget_bytes if flag == "--max-loaded-gb" else self.ledger.total
        message = (f"model '{resident.name}' needs about {_gb(need)} of weights and the {flag} budget "
                   f"({_gb(total)}) is held by models that cannot be unloaded now: {held or 'requests in flight'}")
        if busy or flag == "--memory-budget-gb" and self.ledger.claimed():
            # leases end, loads finish and requests give their KV back: worth retrying
            return ApiError(503, message, code="model_budget_busy", headers={"Retry-After": "5"})
        return ApiError(507, message + f"; unpin one or raise {flag}", code="model_budget_full")

    async def unload(self, name: str, *, force: bool = False) -> bool:
        """Unload a model no request holds (pinned ones only with ``force``); False if it could not."""
        resident = self.models[name]
        if resident.state != "ready" or resident.leases or (resident.pinned and not force):
            return False
        if resident.sleeps:  # the primary: its engine stays, asleep (False: a request got to it meanwhile)
            if not await asyncio.to_thread(resident.engine.sleep):
                return False
            resident.estimated_bytes = resident.estimated_bytes or resident.nbytes  # what waking takes
            resident.state, resident.nbytes = "unloaded", 0
        else:
            engine, resident.engine, resident.state, resident.nbytes = resident.engine, None, "unloaded", 0
            await asyncio.to_thread(_shutdown, engine)
        log.info("model %s unloaded", resident.name)
        return True

    async def enforce_budget(self, keep: Resident | None = None) -> list[str]:
        """Unload least recently used idle models until the weights fit the budget."""
        evicted = []
        while self.budget_bytes and self.loaded_bytes + self.outside() > self.budget_bytes:
            if (victim := self._least_used_idle(besides=keep)) is None:
                break
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

    def watch_memory(self) -> None:
        """Under ``--memory-budget-gb``: when an engine's next request finds no KV room, an idle
        model is unloaded for it (``reclaim``, on this loop; one pending at a time)."""
        if self.ledger is None or self.ledger.on_starved is not None:
            return
        loop, pending = asyncio.get_running_loop(), []

        def run() -> None:
            task = asyncio.ensure_future(self.reclaim())
            task.add_done_callback(lambda t: (pending.clear(), t.cancelled() or t.exception()))

        def starved() -> None:  # on an engine thread
            if not pending:
                pending.append(True)
                loop.call_soon_threadsafe(run)

        self.ledger.on_starved = starved

    async def reclaim(self) -> str | None:
        """An engine's next request waits for memory (``--memory-budget-gb``): unload the least
        recently used idle model, one a call (the engine looks again once it is gone, and calls
        again if it still finds no room)."""
        if self.ledger is None or self.ledger.shortfall() <= 0:
            return None
        if (victim := self._least_used_idle()) is not None and await self.unload(victim.name):
            log.info("model %s unloaded: a request waits for memory", victim.name)
            return victim.name
        return None

    async def reaper(self, every_s: float = 1.0) -> None:
        while True:
            await asyncio.sleep(every_s)
            try:
                await self.reap()
            except Exception:  # noqa: BLE001 - the reaper must outlive any one failure
                log.exception("idle unload failed")

    @property
    def loaded_bytes(self) -> int:  # the weights of the pool's ready models
        return sum(r.nbytes for r in self.models.values() if r.state == "ready")

    def describe(self) -> list[dict]:
        return [r.describe() for r in self.models.values()]

    async def close(self) -> None:
        for r in self.models.values():
            if r.engine is not None and not r.pinned and not r.sleeps:  # the primary is the server's to stop
                await asyncio.to_thread(_shutdown, r.engine)
                r.engine, r.state = None, "unloaded"


def _shutdown(engine: Any) -> None:
    engine.shutdown()
    import mlx.core as mx

    mx.clear_cache()


def _why_held(r: Resident) -> str:
    if r.state == "loading":
        return "loading"
    return "in use" if r.leases else "pinned"


def _gb(n: int) -> str:
    return f"{n / (1 << 30):.2f} GiB" if n >= 1 << 27 else f"{n / (1 << 20):.1f} MiB"


def weights_bytes(engine: Any) -> int:
    from mlx.utils import tree_flatten

    model = getattr(getattr(engine, "model", None), "model", None)
    if model is None:
        return 0
    return sum(v.nbytes for _, v in tree_flatten(model.parameters()))
