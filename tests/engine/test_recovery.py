"""Recovery from failed engine steps, proven by fault injection (EngineConfig.fault_hook)."""

from __future__ import annotations

import pytest

from mlxctl.engine.engine import Engine, EngineConfig
from mlxctl.engine.events import FinishReason, TokenEvent
from mlxctl.engine.prefix_config import PrefixConfig
from mlxctl.engine.sampling import SamplingParams
from mlxctl.errors import BadInputError, EngineError
from tests.engine.tiny import tiny_loaded

GREEDY = SamplingParams(temperature=0.0, max_tokens=24, ignore_eos=True)
PROMPTS = [list(range(1, 12)), list(range(20, 45)), [5, 6, 7]]


class Faults:
    """Raise on the given calls of the hook (0-based), or on every call when ``always``."""

    def __init__(self, *calls: int, always: bool = False, error: type[Exception] = RuntimeError):
        self.calls, self.always, self.error, self.n = set(calls), always, error, 0

    def __call__(self, step: int) -> None:
        n, self.n = self.n, self.n + 1
        if self.always or n in self.calls:
            raise self.error(f"injected fault at call {n}")


def engine(hook=None, **kw) -> Engine:
    loaded = tiny_loaded()
    cfg = EngineConfig(fault_hook=hook, retry_backoff_s=0.001, prefix=PrefixConfig(block_size=4), **kw)
    return Engine(lambda: loaded, cfg).start()


@pytest.fixture(scope="module")
def reference():
    eng = engine()
    try:
        yield [eng.submit(p, GREEDY).collect().token_ids for p in PROMPTS]
    finally:
        eng.shutdown()


@pytest.mark.parametrize("calls", [(0,), (3,), (10,), (3, 4), (2, 9, 15)])
def test_a_failed_step_is_invisible_to_the_client(reference, calls):
    faults = Faults(*calls)
    eng = engine(faults)
    try:
        streams = [eng.submit(p, GREEDY) for p in PROMPTS]
        events = [list(s) for s in streams]
        stats = eng.stats()
    finally:
        eng.shutdown()
    for got, want in zip(events, reference):
        tokens = [t for e in got if isinstance(e, TokenEvent) for t in e.token_ids]
        assert tokens == list(want)  # one uninterrupted stream, the same greedy tokens
        assert got[-1].reason is FinishReason.LENGTH and got[-1].usage.completion_tokens == 24
    assert stats["failed_steps"] == len(calls)
    assert stats["preemptions"] >= (1 if max(calls) > 0 else 0)  # before the first step nothing is in flight


def test_a_request_that_keeps_failing_ends_with_a_clear_error_and_the_engine_goes_on():
    faults = Faults(always=True, error=MemoryError)
    eng = engine(faults, max_retries=2)
    try:
        with pytest.raises(EngineError, match=r"after \d+ failed (attempts|engine steps in a row): MemoryError: injected"):
            eng.submit(PROMPTS[0], GREEDY).collect()
        faults.always = False
        done = eng.submit(PROMPTS[1], GREEDY).collect()
        faults.always = True  # nothing gets through, not even prefill: the queue is failed too
        with pytest.raises(EngineError, match=r"failed engine steps in a row"):
            eng.submit(PROMPTS[2], GREEDY).collect()
    finally:
        eng.shutdown()
    assert done.finish_reason is FinishReason.LENGTH and len(done.token_ids) == 24


def test_sampled_requests_with_penalties_resume_with_their_full_length():
    params = SamplingParams(temperature=0.8, max_tokens=30, ignore_eos=True, frequency_penalty=0.5, seed=3)
    eng = engine(Faults(5, 12))
    try:
        done = [eng.submit(p, params).collect() for p in PROMPTS]
    finally:
        eng.shutdown()
    assert all(len(d.token_ids) == 30 for d in done)


def test_the_reported_prompt_and_cache_figures_are_the_first_attempts(reference):
    eng = engine(Faults(6))
    try:
        done = eng.submit(PROMPTS[1], GREEDY).collect()
    finally:
        eng.shutdown()
    assert done.usage.prompt_tokens == len(PROMPTS[1]) and done.usage.cached_tokens == 0
    assert done.token_ids == reference[1]


@pytest.mark.slow  # over 6 s: the slow step (keeps the default suite near 15 minutes)
def test_real_model_greedy_output_survives_faults(smollm2):
    from mlxctl.api.prompt import chat_messages, render_chat
    from mlxctl.models.loader import load_model

    loaded = load_model(smollm2.path)
    prompt = render_chat(loaded.tokenizer, chat_messages("Write two sentences about the sea."))
    params = SamplingParams(temperature=0.0, max_tokens=40)
    results = []
    for hook in (None, Faults(4, 20, 21)):
        eng = Engine(lambda: loaded, EngineConfig(fault_hook=hook, retry_backoff_s=0.001)).start()
        try:
            results.append(eng.submit(prompt, params).collect())
        finally:
            eng.shutdown()
    clean, faulted = results
    assert faulted.text == clean.text and len(set(clean.token_ids)) > 10


class Poison:
    """Raise before every step while the request holding ``tokens`` as its prompt is in flight."""

    def __init__(self, tokens: list[int]):
        self.tokens, self.engine, self.raised = tokens, None, 0

    def __call__(self, step: int) -> None:
        sched = self.engine.scheduler
        if any(r.prompt_tokens == self.tokens for r in (*sched.prefilling, *sched.running)):
            self.raised += 1
            raise RuntimeError("poisoned request in flight")


def test_one_request_that_keeps_failing_ends_alone_and_the_others_finish_unharmed(reference):
    poison = Poison(PROMPTS[1])
    eng = engine(poison, max_retries=2)
    poison.engine = eng
    try:
        streams = [eng.submit(p, GREEDY) for p in PROMPTS]
        results = []
        for s in streams:
            try:
                results.append(s.collect())
            except EngineError as exc:
                results.append(exc)
        stats = eng.stats()
    finally:
        eng.shutdown()
    assert isinstance(results[1], EngineError) and "after 3 failed attempts" in str(results[1])
    for i in (0, 2):  # batched with the poisoned one at first, then cleared one at a time
        assert results[i].token_ids == reference[i] and results[i].finish_reason is FinishReason.LENGTH
    assert poison.raised == stats["failed_steps"] >= 4  # one shared failure, then three of its own


def test_a_failed_prefill_is_retried_and_a_bad_input_in_prefill_is_not(reference):
    eng = engine()
    real = eng.runner.prefill
    calls = {"n": 0}

    def flaky(req, n):  # the first prefill call fails, as an out-of-memory error would
        calls["n"] += 1
        if calls["n"] == 1:
            raise MemoryError("injected prefill failure")
        return real(req, n)

    try:
        eng.runner.prefill = flaky
        done = eng.submit(PROMPTS[0], GREEDY).collect()
        failed_after_flaky = eng.stats()["failed_steps"]

        def bad(req, n):
            raise BadInputError("the image cannot be read")

        eng.runner.prefill = bad
        with pytest.raises(BadInputError, match="the image cannot be read"):
            eng.submit(PROMPTS[2], GREEDY).collect()
        stats = eng.stats()
    finally:
        eng.shutdown()
    assert done.token_ids == reference[0] and failed_after_flaky == 1
    assert stats["failed_steps"] == 1  # the bad input ended its request without a retry


def test_suspects_are_admitted_one_at_a_time_and_others_go_ahead():
    from collections import deque

    from mlxctl.engine.scheduler import SchedulerConfig, admit

    class R:
        def __init__(self, rid):
            self.id = rid

    a, b, c, d = R("a"), R("b"), R("c"), R("d")
    waiting = deque([a, b, c, d])
    got = admit(waiting, [], [], SchedulerConfig(max_num_seqs=8, max_prefilling=8), {"a", "b"})
    assert [r.id for r in got] == ["a", "c", "d"] and [r.id for r in waiting] == ["b"]
    got = admit(waiting, [], [a], SchedulerConfig(max_num_seqs=8, max_prefilling=8), {"a", "b"})
    assert got == [] and [r.id for r in waiting] == ["b"]  # a suspect is still in flight
