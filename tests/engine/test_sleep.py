"""An idle engine gives its model's memory back and loads it again (serve --no-pin-primary)."""

from __future__ import annotations

import threading

from mlxctl.engine.engine import Engine
from mlxctl.engine.sampling import SamplingParams
from tests.engine.tiny import TinyModel, tiny_llama

GREEDY = SamplingParams(temperature=0, max_tokens=12)


def counting_loader():
    loads = []

    def load():
        loads.append(1)
        return TinyModel(tiny_llama(seed=3))

    return load, loads


def test_a_sleeping_engine_drops_its_weights_and_answers_the_same_after_waking():
    load, loads = counting_loader()
    with Engine(load) as engine:
        before = engine.submit([1, 2, 3, 4], GREEDY).collect().token_ids
        assert engine.sleep() is True and engine.asleep
        assert engine.model.model is None and engine.runner is None  # the weights are gone
        assert engine.model.tokenizer is not None and engine.model.context_length == 512  # the husk prepares requests
        assert engine.stats()["prefix_cache"] == {"enabled": False}
        engine.wake()
        assert not engine.asleep and engine.model.model is not None and len(loads) == 2
        assert engine.submit([1, 2, 3, 4], GREEDY).collect().token_ids == before
        engine.wake()  # awake: nothing to do
        assert len(loads) == 2


def test_a_request_reaching_a_sleeping_engine_wakes_it():
    load, loads = counting_loader()
    with Engine(load) as engine:
        before = engine.submit([5, 6, 7], GREEDY).collect().token_ids
        engine.sleep()
        assert engine.submit([5, 6, 7], GREEDY).collect().token_ids == before
        assert not engine.asleep and len(loads) == 2


def test_a_busy_engine_does_not_sleep():
    from mlxctl.engine.engine import EngineConfig
    from tests.engine.gate import StepGate

    gate = StepGate()  # holds the engine before its first step, the request already taken in
    with Engine(lambda: TinyModel(tiny_llama(seed=3)), EngineConfig(fault_hook=gate)) as engine:
        stream = engine.submit([1, 2, 3], SamplingParams(temperature=0, max_tokens=40))
        assert gate.held.wait(30)
        answer: list[bool] = []
        asking = threading.Thread(target=lambda: answer.append(engine.sleep()))
        asking.start()
        gate.release()
        asking.join(30)
        assert answer == [False] and not engine.asleep
        stream.collect()
        assert engine.sleep() is True


def test_a_failed_load_on_waking_is_raised_and_fails_the_request_that_woke_it():
    calls = []

    def load():
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("the disk went away")
        return TinyModel(tiny_llama(seed=3))

    with Engine(load) as engine:
        engine.sleep()
        try:
            engine.wake()
        except RuntimeError as exc:
            assert "the disk went away" in str(exc)
        else:
            raise AssertionError("wake should raise the load's error")
        assert engine.asleep
        done = engine.submit([1, 2], GREEDY)
        try:
            done.collect()
        except Exception as exc:  # noqa: BLE001
            assert "the disk went away" in str(exc)
        else:
            raise AssertionError("the request should end with the load's error")
