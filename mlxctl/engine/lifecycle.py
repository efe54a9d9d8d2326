"""A request's end of a step: its tokens become events, and it finishes (stop, abort, error).

:class:`Lifecycle` is a mixin of :class:`~mlxctl.engine.engine.Engine`. It runs on the engine
thread: ``_emit`` turns a decode step's tokens into stream events once per step, ``_emit_one``
is the per-token part (a speculative step calls it for each accepted token,
engine/speculative_step.py), ``_finish`` ends a request wherever it is (waiting, prefilling or
running) and ``_fail_all`` ends them all. A mixin rather than an object of its own: the per-token
path stays one method call, and a tensor-parallel rank overrides ``_finish`` (distributed/lockstep.py).
"""

from __future__ import annotations

import time
from typing import Any

from mlxctl.engine import speculative_undo
from mlxctl.engine.batch import DecodeBatch, StackedRow
from mlxctl.engine.events import FinishEvent, FinishReason, TokenLogprob
from mlxctl.engine.request import Request
from mlxctl.engine.scheduler import Scheduler
from mlxctl.errors import EngineError, MlxctlError


class Lifecycle:
    """Emitting tokens and finishing requests (needs the engine's scheduler, batch and prefix cache)."""

    scheduler: Scheduler
    batch: DecodeBatch
    prefix: Any  # PrefixReuse
    _overhang: int  # while a speculative step emits: cached tokens after the one being emitted
    _emitted: int  # tokens emitted so far

    def _emit(self, reqs: list[Request], tokens: Any, samples: list[Any]) -> list[int]:
        """Turn the pending tokens into events; return the rows that go on decoding."""
        keep = []
        for row, (req, token_id) in enumerate(zip(reqs, tokens.tolist())):
            if req.aborted:
                self._finish(req, FinishReason.ABORT)
            elif self._emit_one(req, token_id, samples[row], row) is None:
                keep.append(row)
        return keep

    def _emit_one(self, req: Request, token_id: int, sample: Any, row: int) -> FinishReason | None:
        matcher = req.constraint  # advanced with this token when the step after it was queued
        if matcher is not None and matcher.rejected:  # not part of a valid output: never emitted
            self._finish(req, FinishReason.ERROR, EngineError(matcher.error))
            return FinishReason.ERROR
        req.num_generated += 1
        self._emitted += 1
        req.generated.append(token_id)
        if req.first_token is None:
            req.first_token = time.perf_counter()
        event, reason = req.output.process(token_id, _logprob(token_id, sample))
        req.stream.put(event)
        if matcher is not None and reason is not FinishReason.STOP:
            if matcher.error is not None:  # a dead end: no token may follow this one
                self._finish(req, FinishReason.ERROR, EngineError(matcher.error))
                return FinishReason.ERROR
            if matcher.done:  # the grammar is complete: only EOS could follow
                reason = FinishReason.STOP
        if reason is not None:
            self._remember_whole(req, row)
            self._finish(req, reason)
        return reason

    def _remember_whole(self, req: Request, row: int) -> None:
        """Keep prompt + answer: the next turn of a conversation starts with both. The step
        queued this round fed the last token in, so the batch's KV covers all of them."""
        if self.prefix.enabled:
            cache = self.batch.stacked(row) if self.prefix.stacks else self.batch.extract(row)
            # (a StackedRow is cut at the tokens kept; a list is trimmed of the accepted draft tokens after the stop)
            if isinstance(cache, StackedRow) or speculative_undo.trim(cache, self._overhang):
                self.prefix.remember_answer(req, cache)  # (recurrent state past a stop cannot go back: not kept)

    def _finish(self, req: Request, reason: FinishReason, error: BaseException | None = None) -> None:
        req.finished_at = time.perf_counter()
        self.scheduler.finish(req)
        self.prefix.forget(req)
        req.cache = None
        text = "" if error is not None or reason is FinishReason.ABORT else req.output.flush()
        err = _as_engine_error(error) if error is not None else None
        stop = req.output.stop_string if reason is FinishReason.STOP else None
        req.stream.put(FinishEvent(reason, req.usage(), req.timings(), text, err, stop))

    def _fail_all(self, reason: FinishReason, error: BaseException | None) -> None:
        for req in [*self.scheduler.waiting, *self.scheduler.prefilling, *self.scheduler.running]:
            self._finish(req, reason, error)
        self.batch = DecodeBatch()


def _logprob(token_id: int, sample: Any) -> TokenLogprob | None:
    from mlxctl.engine.logprobs import to_token_logprob

    return None if sample is None else to_token_logprob(token_id, sample)


def _as_engine_error(error: BaseException) -> MlxctlError:
    if isinstance(error, MlxctlError):
        return error
    return EngineError(f"generation failed: {type(error).__name__}: {error}")
