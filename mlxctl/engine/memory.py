"""Admission by memory: what a request's KV will cost, and whether it fits the budget.

``serve --memory-budget-gb`` is one figure for everything a model server holds: the weights,
the prefix cache and the KV of the requests it runs. The engine keeps the KV share of it:

* **Cost.** :class:`KVFootprint` reads a model's KV bytes per token from a cache that holds one
  token (so ``--kv-bits``, grouped-query heads, sliding windows and recurrent state all count as
  they are built), rounded up to the 256-token steps caches grow by.
* **Reservation.** A request reserves its prompt plus every token it may generate. Running
  requests decode as one batch padded to its longest row, so what a set of requests needs is
  their count times the longest reservation (:meth:`KVFootprint.batch_bytes`).
* **Admission.** At submit a request whose KV alone cannot fit is refused (400, naming the
  budget; a request that set no ``max_tokens`` is given as many new tokens as fit instead of
  the whole context). A waiting request starts only when it fits beside the ones in flight; when
  the queue already holds a budget's worth of work, a new request gets 503 with Retry-After.
  Nothing runs out of memory mid-step because of the KV the engine admitted.
* **One budget for every model.** Under ``serve`` every engine (the primary and the pool's)
  shares one :class:`MemoryLedger`: what each loaded engine holds (weights, prefix cache cap)
  and the KV its requests in flight claim all count against the one figure. An engine admits a
  request only when its batch's KV fits what the others leave; one whose queue waits only on
  the others is woken when they give room back, and the pool unloads idle models for it
  (server/residency.py).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mlxctl.errors import BadInputError, ContextOverflowError, MemoryBusyError

STEP = 256  # KV caches grow by this many positions


@dataclass(frozen=True)
class KVFootprint:
    per_token: int  # bytes per position of the layers that keep every position
    windows: tuple[tuple[int, int], ...] = ()  # (bytes per position, window) of sliding-window layers
    fixed: int = 0  # bytes of state that does not grow (recurrent layers)

    @classmethod
    def of(cls, model: Any, kv: Any = None) -> "KVFootprint":
        """Measured on ``model``'s own cache (``--kv-bits`` applied) after one token."""
        import mlx.core as mx

        from mlxctl.engine.kv.quantized import make_cache

        cache = make_cache(model, kv)
        model(mx.array([[0]]), cache=cache)
        per_token, windows, fixed = 0, [], 0
        for layer in cache:
            keys, values = getattr(layer, "keys", None), getattr(layer, "values", None)
            if keys is None:  # recurrent state (ArraysCache and kin): a fixed size
                fixed += sum(a.nbytes for a in getattr(layer, "state", ()) if hasattr(a, "nbytes"))
                continue
            width = sum(_row_bytes(part) for side in (keys, values) for part in _parts(side))
            window = getattr(layer, "max_size", None)
            if window:
                windows.append((width, int(window)))
            else:
                per_token += width
        return cls(per_token, tuple(windows), fixed)

    def bytes_for(self, tokens: int) -> int:
        """One sequence of ``tokens`` positions."""
        n = math.ceil(max(tokens, 1) / STEP) * STEP
        return self.per_token * n + sum(width * min(n, window) for width, window in self.windows) + self.fixed

    def batch_bytes(self, reserves: list[int]) -> int:
        """Requests reserving these many positions each, as one batch padded to the longest."""
        return len(reserves) * self.bytes_for(max(reserves)) if reserves else 0

    def tokens_within(self, budget: int) -> int:
        """The longest single sequence whose KV fits ``budget`` bytes (0: none)."""
        if self.bytes_for(1) > budget:
            return 0
        if self.per_token == 0:
            return 1 << 62  # nothing grows past the windows
        lo, hi = 1, max(1, budget // self.per_token) + STEP
        while lo < hi:  # bytes_for rises with the tokens
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if self.bytes_for(mid) <= budget else (lo, mid - 1)
        return lo


def _parts(side: Any) -> tuple:
    return tuple(side) if isinstance(side, (tuple, list)) else (side,)


def _row_bytes(a: Any) -> int:
    """Bytes one position of a (batch, heads, positions, width) cache array holds."""
    return a.shape[1] * a.shape[3] * a.dtype.size if a.ndim == 4 else 0


class MemoryLedger:
    """``--memory-budget-gb`` shared by a server's engines: what each loaded engine holds
    (``held``: weights, prefix cache cap), the KV bytes its requests in flight claim, and by how
    much each one's next request falls short (``starved``). Thread-safe: every engine admits on
    its own thread."""

    def __init__(self, total: int):
        self.total = total
        self._lock = threading.Lock()
        self.held: dict[int, int] = {}
        self.claims: dict[int, int] = {}
        self.starved: dict[int, int] = {}
        self.pinned: set[int] = set()  # engines that are never unloaded: their holdings bound the others
        self._nudges: dict[int, Callable[[], None]] = {}
        # called (on the refused engine's thread) when a claim does not fit: the server's pool
        # unloads an idle model for it (server/residency.py: ModelPool.reclaim)
        self.on_starved: Callable[[], None] | None = None

    def join(self, key: int, held: int, nudge: Callable[[], None], pinned: bool = False) -> None:
        with self._lock:
            self.held[key], self.claims[key], self._nudges[key] = held, 0, nudge
            if pinned:
                self.pinned.add(key)
        self._wire()

    def leave(self, key: int) -> None:
        with self._lock:
            for table in (self.held, self.claims, self.starved, self._nudges):
                table.pop(key, None)
            self.pinned.discard(key)
            waiting = list(self._nudges.values()) if self.starved else []
        self._wire()
        for nudge in waiting:
            nudge()

    def fixed_besides(self, key: int) -> int:
        """What the pinned engines other than ``key`` hold: never given back."""
        with self._lock:
            return sum(b for k, b in self.held.items() if k in self.pinned and k != key)

    def _room(self, key: int) -> int:
        return self.total - sum(self.held.values()) - sum(b for k, b in self.claims.items() if k != key)

    def room(self, key: int) -> int:
        """KV bytes ``key``'s requests may claim now: the budget less every engine's holdings
        and the other engines' claims."""
        with self._lock:
            return self._room(key)

    def claim(self, key: int, need: int) -> bool:
        """``key``'s requests in flight and its next one need ``need`` KV bytes: claimed if they fit."""
        with self._lock:
            room = self._room(key)
            if need > room:
                self.starved[key] = need - room
            else:
                self.claims[key] = need
                self.starved.pop(key, None)
        if need > room and self.on_starved is not None:
            self.on_starved()
        return need <= room

    def settle(self, key: int, need: int, waiting: bool) -> None:
        """``key``'s requests in flight now need ``need`` (after one ended); the others waiting
        for room are woken when this gave some back."""
        with self._lock:
            freed = need < self.claims.get(key, 0)
            self.claims[key] = need
            if not waiting:
                self.starved.pop(key, None)
            nudges = [n for k, n in self._nudges.items() if k in self.starved and k != key] if freed else []
        for nudge in nudges:
            nudge()

    def used(self) -> int:
        with self._lock:
            return sum(self.held.values()) + sum(self.claims.values())

    def claimed(self) -> int:
        """KV bytes the requests in flight claim, all engines together."""
        with self._lock:
            return sum(self.claims.values())

    def shortfall(self) -> int:
        """The most any engine's next request lacks (0: nobody waits on room)."""
        with self._lock:
            return max(self.starved.values(), default=0)

    def _wire(self) -> None:
        """On Metal the whole budget is wired while any engine holds a share: each engine's
        holdings are its own share (``wired_need``) and the KV room is the ledger's."""
        from mlxctl.engine import wired

        with self._lock:
            room, empty = self.total - sum(self.held.values()), not self.held
        if empty:
            wired.release(id(self))
        else:
            wired.hold(id(self), lambda: max(0, room))


class KVBudget:
    """An engine's share of ``--memory-budget-gb``: the most KV it could ever have (the budget
    less its own holdings and the pinned engines'), and the checks that keep its requests in
    flight within what the other engines leave (``ledger``)."""

    def __init__(self, ledger: MemoryLedger, key: int, held: dict[str, int], footprint: KVFootprint,
                 context_length: int):
        self.ledger, self.key, self.held, self.footprint = ledger, key, held, footprint
        self.total = ledger.total
        self.others = ledger.fixed_besides(key)
        self.kv_bytes = self.total - sum(held.values()) - self.others
        self.longest = footprint.tokens_within(self.kv_bytes)
        if self.longest < 2:
            parts = ", ".join(f"{name} {gib(b)}" for name, b in self.held_all().items())
            raise BadInputError(f"--memory-budget-gb {gib(self.total)} leaves no room for KV beside {parts}",
                                hint="raise --memory-budget-gb, or lower --prefix-cache-gb")
        self.context_length = context_length

    def held_all(self) -> dict[str, int]:
        return {**self.held, **({"other models": self.others} if self.others else {})}

    def describe(self) -> str:
        held = ", ".join(f"{name} {gib(b)}" for name, b in self.held_all().items())
        fits = min(self.longest, self.context_length)
        return (f"memory budget {gib(self.total)}: {held}, KV {gib(self.kv_bytes)} "
                f"({self.footprint.per_token} bytes a token; one sequence of up to {fits} tokens)")

    def admit_alone(self, prompt_len: int, max_new: int, field: str | None) -> int:
        """The new tokens a request may generate, its KV alone within the budget (400 otherwise)."""
        room = self.longest - prompt_len
        if room < 1:
            raise ContextOverflowError(
                f"the prompt has {prompt_len} tokens, whose KV ({gib(self.footprint.bytes_for(prompt_len + 1))}) "
                f"does not fit the memory budget's {gib(self.kv_bytes)} for KV: at most {self.longest - 1} "
                "prompt tokens fit; nothing was truncated",
                prompt_tokens=prompt_len, context_length=self.longest)
        if field is not None and max_new > room:
            raise ContextOverflowError(
                f"{field} is {max_new} but with a {prompt_len}-token prompt at most {room} new tokens fit the "
                f"memory budget's {gib(self.kv_bytes)} for KV",
                prompt_tokens=prompt_len, context_length=self.longest, max_tokens=max_new, param=field)
        return min(max_new, room)

    def fits(self, reserves: list[int]) -> bool:
        """The requests in flight with the next one (its reservation last) fit: claimed if so."""
        return self.ledger.claim(self.key, self.footprint.batch_bytes(reserves))

    def would_fit(self, reserves: list[int]) -> bool:
        """``fits`` without claiming (or marking the engine starved): a question, not a step."""
        return self.footprint.batch_bytes(reserves) <= self.ledger.room(self.key)

    def settle(self, in_flight: list[int], waiting: bool) -> None:
        self.ledger.settle(self.key, self.footprint.batch_bytes(in_flight), waiting)

    def check_queue(self, queued: list[int], reserve: int, running: int) -> None:
        """503 when the requests already waiting fill the KV room on their own."""
        room = self.ledger.room(self.key)
        if queued and self.footprint.batch_bytes([*queued, reserve]) > room:
            raise MemoryBusyError(
                f"the server's memory budget is taken: {len(queued)} queued and {running} running requests "
                f"reserve the {gib(max(room, 0))} its models leave for KV", retry_after_s=max(1, len(queued)),
                hint="retry later, or send a smaller max_tokens")


def gib(n: int) -> str:
    """Bytes for a message: GiB, or MiB below one GiB."""
    return f"{n / (1 << 30):.2f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.1f} MiB"


def setup(engine: Any) -> None:
    """Once the engine's models are loaded: its KV budget (``engine.memory``), the scheduler's
    checks against it, and its share of the wired limit (Metal only: engine/wired.py)."""
    from mlxctl.engine import wired

    engine.memory = kv_budget(engine)
    scheduler = engine.scheduler
    scheduler.fits = engine.memory.fits if engine.memory is not None else None
    scheduler.would_fit = engine.memory.would_fit if engine.memory is not None else None
    scheduler.settle = engine.memory.settle if engine.memory is not None else None
    wired.hold(id(engine), lambda: wired_need(engine))


def leave(engine: Any) -> None:
    """The engine unloads (sleep or stop): what it held goes back to the others."""
    from mlxctl.engine.wired import release

    if engine.memory is not None:
        engine.memory.ledger.leave(engine.memory.key)
    release(id(engine))


def queued(engine: Any, exclude: Any = None) -> list[Any]:
    """The requests submitted and not yet started (the inbox's too), less those of ``exclude``'s group."""
    waiting = [*engine._unseen.values(), *engine.scheduler.queued_work]
    return [r for r in waiting if r is not exclude and (exclude is None or r.group is None or r.group is not exclude.group)]


def check_submit(engine: Any, req: Any) -> None:
    """At submit (under the engine's inbox lock): 503 with Retry-After when the requests already
    queued, not counting ``req``'s own group, fill the KV budget on their own."""
    if engine.memory is not None:
        scheduler = engine.scheduler
        engine.memory.check_queue([r.reserve for r in queued(engine, req)], req.reserve,
                                  len(scheduler.running) + len(scheduler.prefilling))


def status(engine: Any) -> dict | None:
    """``engine.stats()["memory"]``: the budget, what it holds and what the requests in flight reserve."""
    budget = engine.memory
    if budget is None:
        return None
    scheduler = engine.scheduler
    reserved = budget.footprint.batch_bytes([r.reserve for r in (*scheduler.running, *scheduler.prefilling)])
    with engine._unseen_lock:
        waiting = [r.reserve for r in queued(engine)]
    return {"budget_bytes": budget.total,
            **{f"{k.replace(' ', '_')}_bytes": v for k, v in budget.held_all().items()},
            "kv_budget_bytes": budget.kv_bytes, "kv_room_bytes": budget.ledger.room(budget.key),
            "kv_reserved_bytes": reserved,
            "kv_queued_bytes": budget.footprint.batch_bytes(waiting),
            "kv_bytes_per_token": budget.footprint.per_token, "longest_sequence": budget.longest}


def kv_budget(engine: Any) -> KVBudget | None:
    """The engine's KV budget under ``memory_budget_bytes`` (None: no budget): the weights of
    the model (its vision towers and draft model too) and the prefix cache's cap come first (its
    default cap shrinks to a quarter of what the weights leave)."""
    import logging

    from mlxctl.engine.wired import model_bytes

    total = engine.config.memory_budget_bytes
    if not total:
        return None
    ledger = engine.config.memory_ledger or MemoryLedger(total)  # serve's, shared by its engines
    key = id(engine)
    loaded = engine.model
    towers = getattr(getattr(loaded, "vision", None), "towers", None)
    draft = getattr(engine, "draft", None)
    held = {"weights": sum(model_bytes(m) for m in (loaded.model, towers, getattr(draft, "model", None))
                           if m is not None)}
    if engine.prefix.enabled:
        if not engine.config.prefix.max_bytes:  # no --prefix-cache-gb: a quarter of what the weights leave
            free = ledger.total - ledger.used() - held["weights"]
            engine.prefix.cache.max_bytes = min(engine.prefix.cache.max_bytes, max(0, free) // 4)
        held["prefix cache"] = engine.prefix.cache.max_bytes
    budget = KVBudget(ledger, key, held, KVFootprint.of(loaded.model, engine.runner.kv), loaded.context_length)
    ledger.join(key, sum(held.values()), lambda: engine.nudge(), pinned=engine.config.memory_pinned)
    logging.getLogger("mlxctl.engine").info("%s", budget.describe())
    return budget


def wired_need(engine: Any) -> int:
    """What an engine asks Metal to keep wired: under ``--memory-budget-gb`` its weights and
    prefix cache (with the ledger's share, the KV room, the whole budget), else its weights, the prefix cache's cap and the KV of ``max_num_seqs`` full contexts (the
    wired limit then stops at the recommended working set: engine/wired.py)."""
    from mlxctl.engine.wired import model_bytes

    if engine.memory is not None:  # its holdings; the ledger wires the KV room (MemoryLedger._wire)
        return sum(engine.memory.held.values())
    loaded = engine.model
    prefix = engine.prefix.cache.max_bytes if engine.prefix.enabled else 0
    kv = KVFootprint.of(loaded.model, engine.runner.kv)
    return model_bytes(loaded.model) + prefix + \
        kv.batch_bytes([loaded.context_length] * engine.scheduler.cfg.max_num_seqs)
