"""Fairness under mixed load, counted in engine steps (never time): while a long prompt
prefills chunk by chunk, a decoding request gets a token every step and a short prompt that
arrives meanwhile is not held behind the long one's chunks."""

from __future__ import annotations

import threading

from mlxctl.engine.engine import Engine, EngineConfig
from mlxctl.engine.events import TokenEvent
from mlxctl.engine.sampling import SamplingParams
from mlxctl.engine.scheduler import MIN_PACED_TOKENS, SchedulerConfig
from tests.engine.tiny import tiny_loaded

CHUNK = 16
LONG = list(range(1, 60)) * 7  # 413 tokens: 26 chunks of 16


class StepLog:
    """Before each engine step, on the engine thread: every named request's (status, prompt
    tokens done, tokens emitted)."""

    def __init__(self) -> None:
        self.engine: Engine | None = None
        self.steps: list[dict[str, tuple[str, int, int]]] = []
        self.long_started = threading.Event()  # "long" has prefilled a chunk and has more to go

    def __call__(self, step: int) -> None:
        reqs = (*self.engine.scheduler.waiting, *self.engine.scheduler.prefilling, *self.engine.scheduler.running)
        self.steps.append({r.id: (r.status.value, r.num_prefilled, r.num_generated) for r in reqs})
        status, done, _ = self.steps[-1].get("long", ("", 0, 0))
        if status == "prefilling" and done >= CHUNK:
            self.long_started.set()

    def while_prefilling(self, rid: str) -> list[dict[str, tuple[str, int, int]]]:
        return [s for s in self.steps if s.get(rid, ("",))[0] == "prefilling"]


def logged_engine(chunk: int = CHUNK, prefill_step_ms: float | None = None) -> tuple[Engine, StepLog]:
    log = StepLog()
    cfg = SchedulerConfig(prefill_chunk=chunk, prefill_step_ms=prefill_step_ms)
    eng = Engine(tiny_loaded, EngineConfig(scheduler=cfg, fault_hook=log))
    log.engine = eng
    return eng.start(), log


def test_a_decoding_request_gets_a_token_every_step_while_a_long_prompt_prefills():
    eng, log = logged_engine()
    try:
        short = eng.submit([1, 2], SamplingParams(temperature=0.0, max_tokens=60), request_id="short")
        assert isinstance(next(iter(short)), TokenEvent)  # decoding now
        long = eng.submit(LONG, SamplingParams(temperature=0.0, max_tokens=2), request_id="long")
        long.collect()
        short.collect()
    finally:
        eng.shutdown()
    during = [s["short"][2] for s in log.while_prefilling("long") if "short" in s]
    assert len(during) >= len(LONG) // CHUNK
    assert [b - a for a, b in zip(during, during[1:])] == [1] * (len(during) - 1)


def test_a_short_prompt_arriving_mid_prefill_is_not_queued_behind_the_long_one():
    eng, log = logged_engine()
    try:
        long = eng.submit(LONG, SamplingParams(temperature=0.0, max_tokens=2), request_id="long")
        assert log.long_started.wait(60)
        short = eng.submit([5, 6, 7], SamplingParams(temperature=0.0, max_tokens=40), request_id="short")
        short.collect()
        long.collect()
    finally:
        eng.shutdown()
    during = log.while_prefilling("long")
    with_short = [s["short"] for s in during if "short" in s]
    assert with_short, "the short request arrived after the long prompt was done"
    # at most two steps to its first token (one to prefill, one to emit), then one a step
    tokens = [t for _, _, t in with_short]
    assert tokens[2:] == list(range(1, len(tokens) - 1))


def test_while_a_request_decodes_a_paced_long_prompt_moves_on_by_the_floor_each_step():
    """With a step target no chunk can meet, every step while "short" decodes runs the
    floor's worth of "long"'s prompt; once nothing decodes, whole chunks again."""
    eng, log = logged_engine(64, prefill_step_ms=1e-6)  # a target no chunk can meet
    try:
        short = eng.submit([1, 2], SamplingParams(temperature=0.0, max_tokens=8), request_id="short")
        assert isinstance(next(iter(short)), TokenEvent)
        long = eng.submit(LONG, SamplingParams(temperature=0.0, max_tokens=2), request_id="long")
        long.collect()
        short.collect()
    finally:
        eng.shutdown()
    done = [(s["long"][1], "short" in s and s["short"][0] == "running") for s in log.steps if "long" in s]
    moves = [(b - a, decoding) for (a, decoding), (b, _) in zip(done, done[1:]) if b > a]
    # short's own prompt was timed (the first step that finished one): the floor from the start
    paced = [m for m, decoding in moves if decoding]
    assert len(paced) >= 3 and set(paced) == {MIN_PACED_TOKENS}
    whole = [m for m, decoding in moves if not decoding]
    assert len(whole) >= 2 and set(whole[:-1]) == {64} and whole[-1] <= 64


def test_prompts_done_in_one_pass_are_timed_too_and_then_paced():
    """A prompt done in one queued pass is timed too (the first such step waits for it): "short"
    was, so the burst that follows is paced to the floor while "short" decodes. Untimed, each
    40-token prompt would go whole."""
    eng, log = logged_engine(64, prefill_step_ms=1e-6)  # a target no chunk can meet
    try:
        short = eng.submit([1, 2], SamplingParams(temperature=0.0, max_tokens=40), request_id="short")
        assert isinstance(next(iter(short)), TokenEvent)
        burst = [eng.submit(list(range(3 + i, 43 + i)), SamplingParams(temperature=0.0, max_tokens=1),
                            request_id=f"b{i}") for i in range(3)]
        for stream in burst:
            stream.collect()
        short.collect()
    finally:
        eng.shutdown()
    moves = []
    for before, after in zip(log.steps, log.steps[1:]):
        moved = sum(after[r][1] - before[r][1] for r in after if r.startswith("b") and r in before)
        moved += sum(after[r][1] for r in after if r.startswith("b") and r not in before)
        if moved:
            moves.append(moved)
    assert len(moves) >= 6 and max(moves) <= MIN_PACED_TOKENS
