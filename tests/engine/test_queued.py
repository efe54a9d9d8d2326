"""Engine.queued: the requests submitted and not yet scheduled, inbox included.

The engine thread drains its inbox only between steps, so what is submitted while a step runs
is neither in the scheduler's waiting queue nor running; admission control (``serve
--max-waiting``) counts it all the same. A StepGate holds the engine at chosen steps.
"""

from __future__ import annotations

from mlxctl.engine.engine import Engine, EngineConfig
from mlxctl.engine.events import FinishReason
from mlxctl.engine.scheduler import SchedulerConfig
from mlxctl.engine.sampling import SamplingParams
from tests.engine.gate import StepGate
from tests.engine.tiny import tiny_loaded

PARAMS = SamplingParams(temperature=0.0, max_tokens=4, ignore_eos=True)


def held_engine(gate: StepGate) -> Engine:
    loaded = tiny_loaded()
    return Engine(lambda: loaded, EngineConfig(scheduler=SchedulerConfig(max_num_seqs=1), fault_hook=gate)).start()


def test_queued_counts_the_inbox_and_the_waiting_queue_not_what_is_scheduled():
    gate = StepGate()
    eng = held_engine(gate)
    try:
        first = eng.submit([1, 2, 3], PARAMS)
        assert gate.held.wait(30)  # before the first step: `first` waits in the scheduler, unscheduled
        second, third = eng.submit([4, 5], PARAMS), eng.submit([6, 7], PARAMS)  # stay in the inbox
        assert len(eng.scheduler.waiting) == 1
        assert eng.queued == 3
        assert len(eng.stats()["waiting"]) == 3  # /v1/status and the metric read this list
        third.abort()
        gate.hold_next(lambda: bool(eng.scheduler.running))
        assert gate.held.wait(30)  # `first` runs (max_num_seqs 1), `second` waits, `third` is gone
        assert eng.queued == 1
        assert [r["id"] for r in eng.stats()["waiting"]] == [second.request_id]
        gate.release()
        assert first.collect().finish_reason is FinishReason.LENGTH
        assert second.collect().finish_reason is FinishReason.LENGTH
        assert third.collect().finish_reason is FinishReason.ABORT
        assert eng.queued == 0 and eng.stats()["waiting"] == []
    finally:
        gate.release()
        eng.shutdown()
