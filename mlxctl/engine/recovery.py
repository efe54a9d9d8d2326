"""After a failed engine step: who it is held against, so that one request that keeps failing
cannot use up everyone's retries, and how the requests in flight go back to the queue.

A step runs many requests at once, so a failure cannot name its cause. The policy: a request
alone in flight when a step fails is blamed (its attempts grow). When several were in flight
and none of them was already under suspicion, nobody is blamed yet: they all become suspects
and are readmitted one suspect at a time (others still batch with it), each cleared as soon as
a step it is part of succeeds. A failure while a suspect is in flight is that suspect's.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Sequence

from mlxctl.engine.batch import DecodeBatch
from mlxctl.engine.events import FinishReason
from mlxctl.engine.request import Request
from mlxctl.errors import EngineError

log = logging.getLogger("mlxctl.engine")


def blame(in_flight: Sequence[Request], suspects: set[str]) -> list[Request]:
    """The requests a failed step counts against; updates ``suspects`` in place."""
    if len(in_flight) == 1:
        return list(in_flight)
    under_suspicion = [r for r in in_flight if r.id in suspects]
    if under_suspicion:
        return under_suspicion
    suspects.update(r.id for r in in_flight)
    return []


def why_not_resumed(req: Request, max_retries: int) -> str | None:
    """Why a request in flight during a failed step ends with the error instead of going back
    to the queue; None when it is resumed. A matcher's state cannot be rebuilt from the tokens
    already sent, so structured-output requests are never resumed."""
    if req.constraint is not None:
        return "(structured-output requests are not resumed)"
    if req.attempts > max_retries:
        return f"after {req.attempts} failed attempts"
    return None


def recover(engine: Any, error: Exception) -> None:
    """After a failed step (out of memory, a bad kernel, an injected fault): drop the KV of
    everything in flight, free MLX's buffers (and, when it fails again, the prefix cache's
    free blocks), back off, and put every request back at the head of the queue with a
    checkpoint (its prompt plus the tokens already sent), so its stream goes on where it
    stood. A request blamed for more than ``max_retries`` failed steps (see ``blame``: the
    others in flight are retried one suspect at a time), or whose
    state cannot be rebuilt (structured output), ends with the error."""
    import mlx.core as mx

    engine._failures += 1
    in_flight = [*engine.scheduler.prefilling, *engine.scheduler.running]
    blamed = {r.id for r in blame(in_flight, engine.scheduler.one_at_a_time)}
    log.warning("engine step failed (%d in a row, %d requests in flight): %s: %s", engine._failures,
                len(in_flight), type(error).__name__, error)
    engine.batch = DecodeBatch()
    engine.prompts.drop_held()  # their KV may come from the failed step
    for req in in_flight:
        req.cache = None
    mx.clear_cache()
    if engine._failures > 1 and engine.prefix.enabled:
        engine.prefix.clear()
    for req in reversed(in_flight):
        req.attempts += req.id in blamed
        if req.aborted:
            engine._finish(req, FinishReason.ABORT)
        elif (why := why_not_resumed(req, engine.config.max_retries)) is not None:
            if req.id in blamed:
                engine._failures = 0  # the cause is out: the next failure starts a new count
            engine._finish(req, FinishReason.ERROR, EngineError(f"generation failed {why}: "
                                                               f"{type(error).__name__}: {error}"))
        else:
            preempt(engine, req)
    if engine._failures > engine.config.max_retries + 1:  # no step gets through: give up on the queue too
        for req in list(engine.scheduler.waiting):
            engine._finish(req, FinishReason.ERROR, EngineError(
                f"generation failed after {engine._failures} failed engine steps in a row: "
                f"{type(error).__name__}: {error}"))
    engine._failures_total += 1
    time.sleep(min(5.0, engine.config.retry_backoff_s * 2 ** (engine._failures - 1)))


def preempt(engine: Any, req: Request) -> None:
    """Back to the head of the queue, to be prefilled again from its prompt and the tokens
    already sent (its sampler's penalties and seed state carried over)."""
    from mlxctl.engine.sampling import TokenSampler

    engine.prefix.forget(req)
    engine.scheduler.preempt(req)
    req.num_prefilled = 0
    req.resume = req.prompt_tokens + req.generated
    req.sampler = TokenSampler.resumed(req.sampler, req.prompt_tokens, req.generated)
    engine.prefix.attach(req)
    engine._preemptions += 1
