"""The engine on N ranks: rank 0 leads, the others follow its every step.

Every rank runs the same :class:`~mlxctl.engine.engine.Engine` (scheduler, batch, prefix
cache, sampling) over its shard of the model. The engine's state changes only through its
inbox (adds, aborts, cache clears, stop) and through steps, and a step depends only on that
state, so ranks that apply the same inbox messages before the same steps stay identical:
same batches, same forward passes (whose ``all_sum``\\ s pair up), same sampled tokens.

Once per loop turn rank 0 takes what arrived in its inbox and broadcasts it (``None`` when
nothing came, one small reduction); the followers apply what they receive at the same turn.
While rank 0 waits for work, the followers sleep on a doorbell instead of polling
in a collective (see ``doorbell``). Randomness is the one input that is not in the messages, so rank 0 gives every request
without a seed a random one before sending it. Followers' streams go nowhere: rank 0
alone answers clients.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import queue
import secrets
import threading
from typing import Any, Callable, Sequence

from mlxctl.distributed.channel import Channel
from mlxctl.distributed.doorbell import Doorbell
from mlxctl.engine.engine import Engine, EngineConfig
from mlxctl.engine.events import FinishReason
from mlxctl.engine.prefix import default_budget
from mlxctl.engine.request import Request
from mlxctl.errors import BadInputError, EngineError


IDLE = "idle"  # rank 0's message before it waits for work (followers then wait on the doorbell)
log = logging.getLogger("mlxctl.distributed")


class _Nowhere:
    """A follower's request stream: the events are computed, and dropped."""

    def put(self, event: Any) -> None:
        pass


class _Lockstep(Engine):
    def __init__(self, load: Callable[[], Any], config: EngineConfig, group: Any):
        # No prefill pacing: it sizes steps from each rank's own clock, so the ranks' plans
        # would part (scheduler.PrefillPace); every rank plans by the token budget alone.
        config = dataclasses.replace(config, scheduler=dataclasses.replace(config.scheduler, prefill_step_ms=0))
        super().__init__(load, config)
        self.channel = Channel(group)
        self.ranks = group.size()
        self._digest = hashlib.blake2b(digest_size=8)  # over every finished request's tokens
        self.doorbell = Doorbell(self.channel)
        self._broken = False

    def _setup(self) -> None:
        # Decisions a rank would otherwise make from its own machine must be rank 0's, or the
        # ranks drift apart: the prefix cache's default budget comes from the memory size.
        budget = self.channel.broadcast(self.config.prefix.max_bytes or default_budget())
        self.config = dataclasses.replace(self.config, prefix=dataclasses.replace(self.config.prefix, max_bytes=budget))
        super()._setup()
        self.doorbell.connect()  # every rank, after its load: the handshake is collective

    def _recover(self, error: Exception) -> None:
        """One process recovers a failed step by re-queueing its requests; across ranks that
        would leave the others inside a collective this rank never joins. So the job stops:
        every request ends with the error and the process exits (mlx.launch then stops the
        other ranks)."""
        self._stop_job(f"{type(error).__name__}: {error}")

    def _stop_job(self, why: str) -> None:
        log.error("tensor-parallel rank %d cannot go on (%s): the job stops", self.channel.rank, why)
        self._fail_all(FinishReason.ERROR, EngineError(f"generation failed on rank {self.channel.rank} of a "
                                                       f"tensor-parallel job, which stops: {why}"))
        self._broken = True
        exit_soon(EXIT_BROKEN)

    def stats(self) -> dict:
        return {**super().stats(), "tensor_parallel": {"ranks": self.ranks, "rank": self.channel.rank,
                                                       "broadcasts": self.channel.messages,
                                                       "broadcast_bytes": self.channel.bytes,
                                                       "doorbell": self.doorbell.enabled,
                                                       "digest": self._digest.hexdigest()}}

    def _finish(self, req: Request, reason: Any, error: BaseException | None = None) -> None:
        """Also fold the request's tokens into ``digest``: ranks in step have equal digests, a
        check that costs nothing while serving (tests compare them across ranks)."""
        super()._finish(req, reason, error)
        self._digest.update(f"{req.id}:{reason}:{req.generated}".encode())


class LeaderEngine(_Lockstep):
    """Rank 0: the engine clients submit to; it sends each turn's inbox to the followers."""

    def submit(self, prompt_tokens: list[int], params: Any, *, images: Sequence[Any] = (), **kw: Any) -> Any:
        if images:
            raise BadInputError("images are not supported with --tensor-parallel yet")
        return super().submit(prompt_tokens, params, **kw)

    def _drain_inbox(self, block: bool) -> bool:
        if self._broken:
            return False
        if block and self.doorbell.enabled:  # idle: the followers sleep until something comes
            self.channel.broadcast(IDLE)
            taken = _take(self._inbox, block=True)
            try:
                self.doorbell.ring()
            except OSError as exc:
                self._stop_job(f"a follower rank is gone ({exc})")
                return False
        else:
            taken = _take(self._inbox, block)
        self.channel.broadcast([_wire(kind, payload) for kind, payload in taken] or None)
        for kind, payload in taken:
            if kind == "stop":
                return False
            self._apply(kind, payload)
        return True


class FollowerEngine(_Lockstep):
    """Ranks 1..N-1: apply rank 0's messages, step when it steps. Nothing is submitted here."""

    def _drain_inbox(self, block: bool) -> bool:
        if self._broken:
            return False
        messages = self.channel.broadcast()
        if messages == IDLE:
            if not self.doorbell.wait():
                log.error("rank 0 went away: this rank stops")
                return False
            messages = self.channel.broadcast()
        for message in messages or ():
            kind = message[0]
            if kind == "stop":
                return False
            if kind == "add":
                self._admit(self._request(*message[1:]))
            elif kind == "abort":
                self._abort(message[1])
            elif kind == "clear_prefix_cache":
                self.prefix.clear(disk=message[1])
        return True

    def _request(self, rid: str, tokens: list[int], params: Any, max_new: int, salt: str) -> Request:
        matcher = None
        if params.constraint is not None:
            from mlxctl.engine.constraints import compile_constraint

            matcher = compile_constraint(params.constraint, self.model.tokenizer).matcher(self.vocab_size)
        return Request(rid, tokens, params, _Nowhere(), max_new, constraint=matcher, cache_salt=salt)

    def wait(self) -> None:
        """Block until rank 0 stops the job (or the engine thread ends otherwise)."""
        if self._thread is not None:
            while self._thread.is_alive():
                self._thread.join(1.0)
        self._join_thread(10.0)


EXIT_BROKEN = 70  # EX_SOFTWARE: a rank left the job


def exit_soon(code: int, delay_s: float = 1.0) -> None:
    """Exit the process shortly (the streams' error events get that long to reach clients)."""
    timer = threading.Timer(delay_s, os._exit, args=(code,))
    timer.daemon = True
    timer.start()


def lockstep_engine(load: Callable[[], Any], config: EngineConfig, group: Any) -> Engine:
    """The leader on rank 0, a follower elsewhere."""
    return (LeaderEngine if group.rank() == 0 else FollowerEngine)(load, config, group)


def _take(inbox: queue.SimpleQueue, block: bool) -> list[tuple[str, Any]]:
    """What the inbox holds now (waiting for a first message when ``block``), up to a stop."""
    taken = []
    try:
        message = inbox.get(block=block)
        while True:
            taken.append(message)
            if message[0] == "stop":
                break
            message = inbox.get_nowait()
    except queue.Empty:
        pass
    return taken


def _wire(kind: str, payload: Any) -> tuple:
    """An inbox message as the followers need it: plain data, every random choice made."""
    if kind == "add":
        req: Request = payload
        if req.params.seed is None:
            req.params = dataclasses.replace(req.params, seed=secrets.randbits(63))
        return ("add", req.id, req.prompt_tokens, req.params, req.max_new_tokens, req.cache_salt)
    if kind == "clear_prefix_cache":
        return (kind, payload[1])
    if kind == "call":  # Engine._ask (sleep, wake): the leader's own; followers skip it
        return (kind,)
    return (kind, payload)
