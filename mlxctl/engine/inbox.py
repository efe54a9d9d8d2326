"""The engine's inbox: how any thread's requests, aborts and calls reach the engine thread.

:class:`Inbox` is a mixin of :class:`~mlxctl.engine.engine.Engine`. Callers put messages on a
queue (``add``, ``abort``, ``nudge``, ``clear_prefix_cache``, ``call``, ``stop``); the engine
thread drains it between steps, so the scheduler and the batch are only ever changed there. A
submitted request counts in ``queued`` while still in the inbox too, not only once the scheduler
has it. A tensor-parallel rank drains its inbox its own way (distributed/lockstep.py).
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Callable

from mlxctl.engine import memory, sleep
from mlxctl.engine.events import FinishReason
from mlxctl.engine.request import Request, RequestStatus
from mlxctl.engine.scheduler import Scheduler

if TYPE_CHECKING:
    from mlxctl.engine.engine import Engine


class Inbox:
    """Messages to the engine thread and what it does with them (needs the engine's scheduler,
    model and prefix cache; the queue and the unseen requests are made by ``Engine.__init__``)."""

    scheduler: Scheduler
    model: Any  # LoadedModel
    vocab_size: int
    prefix: Any  # PrefixReuse
    asleep: bool
    _inbox: queue.SimpleQueue
    _unseen: dict[int, Request]  # submitted, still in the inbox (see ``queued``)
    _unseen_lock: threading.Lock
    _finish: Callable[..., None]  # Lifecycle._finish

    # -- caller side ------------------------------------------------------------------------

    def _enqueue(self, req: Request) -> None:
        """``submit``'s last part: count ``req`` as queued and send it to the engine thread."""
        with self._unseen_lock:
            memory.check_submit(self, req)  # 503 when the queue already fills the memory budget
            self._unseen[id(req)] = req
        self._inbox.put(("add", req))

    @property
    def queued(self) -> int:
        """Requests submitted and not yet scheduled: those still in the inbox (which the engine
        thread drains only between steps) and those in the scheduler's waiting queue. What
        admission control bounds (``serve --max-waiting``); safe to read from any thread."""
        with self._unseen_lock:
            return len(self._unseen) + len(self.scheduler.waiting)

    def abort(self, request_id: str) -> None:
        self._inbox.put(("abort", request_id))

    def news(self) -> bool:
        """Whether work waits for this step to end: messages in the inbox (drained between
        steps), prompts prefilling, or a waiting request the scheduler would admit (one held by
        the sequence limit or the memory budget would wait anyway). A step that could run on
        stops for it (engine/speculative_chain.py)."""
        return not self._inbox.empty() or bool(self.scheduler.prefilling) or self.scheduler.admits_next()

    def nudge(self) -> None:
        """Another engine gave memory back: a queue that waited on it is looked at again."""
        self._inbox.put(("nudge", None))

    def clear_prefix_cache(self, timeout: float = 30.0, *, disk: bool = False) -> int:
        """Drop every cached prefix block no request holds (and the disk tier's blocks when
        ``disk``); returns how many went (none while asleep: the cache was closed then). Its own
        message, not ``_ask``: tensor-parallel followers clear theirs too (distributed/lockstep.py)."""
        done: Future = Future()
        self._inbox.put(("clear_prefix_cache", (done, disk)))
        return done.result(timeout)

    def _ask(self, work: Callable[["Engine"], Any], timeout: float | None) -> Any:
        """``work(self)`` run on the engine thread between steps; its result, or its error raised."""
        done: Future = Future()
        self._inbox.put(("call", (done, work)))
        return done.result(timeout)

    # -- engine thread ------------------------------------------------------------------------

    def _drain_inbox(self, block: bool) -> bool:
        """Apply queued adds/aborts; False when asked to stop."""
        try:
            msg = self._inbox.get(block=block)
        except queue.Empty:
            return True
        while True:
            if msg[0] == "stop":
                return False
            self._apply(*msg)
            try:
                msg = self._inbox.get_nowait()
            except queue.Empty:
                return True

    def _apply(self, kind: str, payload: Any) -> None:
        if kind == "add":
            if not self.asleep or sleep.wake_for(self, payload):
                self._admit(payload)
        elif kind == "abort":
            self._abort(payload)
        elif kind == "nudge":  # room came back (memory.MemoryLedger): the next step looks again
            self.scheduler.stalled = False
        elif kind == "clear_prefix_cache":
            done, disk = payload
            done.set_result(self.prefix.clear(disk=disk) if self.prefix is not None else 0)  # (None asleep)
        elif kind == "call":  # _ask
            done, work = payload
            try:
                done.set_result(work(self))
            except BaseException as exc:  # noqa: BLE001 - the asker's to raise
                done.set_exception(exc)

    def _admit(self, req: Request) -> None:
        from mlxctl.engine.output import OutputProcessor
        from mlxctl.engine.sampling import TokenSampler

        req.sampler = TokenSampler(req.params, self.vocab_size, req.prompt_tokens)
        self.prefix.attach(req)
        req.output = OutputProcessor(self.model.tokenizer, req.params, self.model.eos_token_ids, req.max_new_tokens,
                                     context_ids=req.prompt_tokens[-4:])
        with self._unseen_lock:  # from the inbox to the waiting queue in one move, as ``queued`` sees it
            self.scheduler.add(req)
            self._unseen.pop(id(req), None)  # a follower rank's requests were never submitted here

    def _abort(self, request_id: str) -> None:
        req = self.scheduler.find(request_id)
        if req is None:
            return
        if req.status is RequestStatus.RUNNING:
            req.aborted = True  # leaves the batch at the next emit
        else:
            self._finish(req, FinishReason.ABORT)
