"""Issue 20: one ``--memory-budget-gb`` for every engine of a server (engine/memory.py's
MemoryLedger). Two tiny random llamas share a budget whose KV room holds one long request: the
second engine's request waits while the first's runs, and starts once that one ends or its engine
unloads; a pinned engine's holdings bound what the other may ever be given."""

from __future__ import annotations

import threading

import pytest

from mlxctl.engine.engine import Engine, EngineConfig
from mlxctl.engine.memory import KVBudget, KVFootprint, MemoryLedger
from mlxctl.engine.prefix_config import PrefixConfig
from mlxctl.engine.sampling import SamplingParams
from mlxctl.engine.wired import model_bytes
from mlxctl.errors import ContextOverflowError
from tests.engine.gate import StepGate
from tests.engine.tiny import TinyModel, tiny_llama

BACKSTOP_S = 60  # a deadlock backstop, never what a test waits for
LONG = SamplingParams(temperature=0, max_tokens=300, max_tokens_field="max_tokens")  # reserves 512 positions
SHORT = SamplingParams(temperature=0, max_tokens=20, max_tokens_field="max_tokens")  # reserves 256


class Ledger(MemoryLedger):
    """A MemoryLedger that signals when a claim does not fit (an engine's queue head waits)."""

    def __init__(self, total: int):
        super().__init__(total)
        self.refused = threading.Event()

    def claim(self, key: int, need: int) -> bool:
        fits = super().claim(key, need)
        if not fits:
            self.refused.set()
        return fits


def models():
    return tiny_llama(seed=0), tiny_llama(seed=1)


def engine(model, ledger: MemoryLedger | None, gate: StepGate | None = None, pinned: bool = False) -> Engine:
    config = EngineConfig(prefix=PrefixConfig(enabled=False), fault_hook=gate,
                          memory_budget_bytes=ledger.total if ledger else None, memory_ledger=ledger,
                          memory_pinned=pinned)
    return Engine(lambda: TinyModel(model=model), config).start()


def shared(a, b) -> Ledger:
    """Both models' weights and KV room for one 512-position request and a bit: not for a
    512-position and a 256-position one at once."""
    fp = KVFootprint.of(a)
    return Ledger(model_bytes(a) + model_bytes(b) + fp.bytes_for(512) + fp.bytes_for(256) // 2)


def tight(pinned: bool) -> tuple[Ledger, Engine, Engine]:
    """Two engines under a budget with room for one 512-position request once the first model
    is gone, not while it is loaded."""
    a, b = models()
    fp = KVFootprint.of(a)
    ledger = Ledger(model_bytes(a) + model_bytes(b) + fp.bytes_for(512) - fp.bytes_for(256) // 2)
    return ledger, engine(a, ledger, pinned=pinned), engine(b, ledger)


def test_the_ledger_counts_every_engine_and_wakes_the_waiting_one():
    ledger, woken = MemoryLedger(1000), []
    ledger.join(1, 300, lambda: woken.append(1), pinned=True)
    ledger.join(2, 200, lambda: woken.append(2))
    assert ledger.room(2) == 500 and ledger.fixed_besides(2) == 300 and ledger.fixed_besides(1) == 0
    assert ledger.claim(1, 400) and ledger.room(2) == 100 and ledger.used() == 900
    assert not ledger.claim(2, 150) and ledger.shortfall() == 50  # engine 2's head waits
    ledger.settle(1, 400, waiting=False)  # nothing given back: nobody is woken
    assert woken == []
    ledger.settle(1, 0, waiting=False)  # engine 1's request ended
    assert woken == [2] and ledger.claim(2, 150) and ledger.shortfall() == 0
    assert not ledger.claim(1, 700)
    ledger.leave(2)  # engine 2 unloads: its weights and claims go back, engine 1 is woken
    assert woken == [2, 1] and ledger.used() == 300 and ledger.claim(1, 700)


def test_a_request_waits_for_another_models_request_and_then_decodes_as_alone():
    a, b = models()
    with engine(b, None) as alone:
        want = alone.submit(list(range(40)), SHORT).collect().token_ids
    ledger = shared(a, b)
    gate = StepGate(hold=lambda: False)
    first, second = engine(a, ledger, gate), engine(b, ledger)
    try:
        gate.hold_next(lambda: bool(first.scheduler.running))
        long = first.submit(list(range(100)), LONG)
        assert gate.held.wait(BACKSTOP_S)  # the first engine's request is in flight, held before a step
        waiting = second.submit(list(range(40)), SHORT)
        assert ledger.refused.wait(BACKSTOP_S)  # the second engine's request found no room
        assert second.scheduler.stalled and not second.scheduler.running
        gate.hold_next(lambda: False)
        assert long.collect().usage.completion_tokens == 300
        assert waiting.collect().token_ids == want  # started once the first gave its KV back
        assert ledger.claims[id(first)] == ledger.claims[id(second)] == 0
    finally:
        gate.release()
        first.shutdown()
        second.shutdown()


def test_an_engine_that_unloads_gives_its_weights_to_the_waiting_one():
    ledger, first, second = tight(pinned=False)
    try:
        assert second.memory.longest >= 512  # the first is not pinned: its weights may go
        waiting = second.submit(list(range(100)), LONG)
        assert ledger.refused.wait(BACKSTOP_S)
        assert first.sleep()  # the pool unloads the idle model (server/residency.py: reclaim)
        assert waiting.collect().usage.completion_tokens == 300
    finally:
        first.shutdown()
        second.shutdown()


def test_a_pinned_engine_bounds_what_the_others_may_ever_get():
    ledger, first, second = tight(pinned=True)
    try:
        assert second.memory.longest < 512 and second.memory.others == sum(first.memory.held.values())
        with pytest.raises(ContextOverflowError, match="memory budget"):
            second.submit(list(range(100)), LONG)
        assert second.stats()["memory"]["other_models_bytes"] == second.memory.others
    finally:
        first.shutdown()
        second.shutdown()


def test_would_fit_answers_without_claiming_or_marking_the_engine_starved():
    """The scheduler asks whether its queue head would be admitted (``admits_next``) without
    taking the decision: nothing is claimed, nobody is marked waiting or woken."""
    ledger, woken = MemoryLedger(100_000), []
    ledger.join(1, 1000, lambda: woken.append(1))
    ledger.join(2, 1000, lambda: woken.append(2))
    footprint = KVFootprint(per_token=10)  # a sequence reserves whole steps of 256 positions: 2560 bytes
    budget = KVBudget(ledger, 2, {"weights": 1000}, footprint, 4096)
    assert ledger.claim(1, 95_000)  # engine 1 leaves 3000 bytes of room: one sequence, not two
    assert budget.would_fit([50]) and not budget.would_fit([50, 60])
    assert ledger.claims.get(2, 0) == 0 and ledger.shortfall() == 0 and woken == []
    assert not budget.fits([50, 60]) and ledger.shortfall() > 0  # the deciding check marks it waiting
