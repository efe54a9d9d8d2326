"""Waiting / prefilling / running queues and the per-step plan.

Each policy is a small function over plain request state, testable with fake requests:
admission (who starts prefilling), chunked prefill (how many prompt tokens each prefilling
request gets this step), and abort (who leaves, whatever their state).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from mlxctl.engine.request import Request, RequestStatus


@dataclass(frozen=True)
class SchedulerConfig:
    max_num_seqs: int = 16  # requests prefilling + decoding at once
    prefill_chunk: int = 0  # prompt tokens per engine step, over all requests; 0: by backend
    max_prefilling: int = 8  # requests whose prompts are in flight at once
    # while rows decode, a step's prompt work is sized to take about this long; 0: off; None: by backend
    prefill_step_ms: float | None = None


def resolve_auto(cfg: SchedulerConfig) -> SchedulerConfig:
    """Fill in settings left to the backend: a GPU prefills 4096 tokens a step in about the
    time a CPU needs for far fewer, so the CPU gets smaller chunks (decoding stalls less). On
    the H200, 4096 against 2048 gave 1.25x and 1.11x the output of 256 streams of 512-token
    prompts in two runs; at 64 streams the two runs disagreed (1.17x, 0.86x: docs/benchmarks.md)."""
    if cfg.prefill_chunk and cfg.prefill_step_ms is not None:
        return cfg
    import mlx.core as mx

    cpu = mx.default_device().type == mx.cpu
    step_ms = cfg.prefill_step_ms if cfg.prefill_step_ms is not None else CPU_STEP_MS if cpu else GPU_STEP_MS
    return dataclasses.replace(cfg, prefill_chunk=cfg.prefill_chunk or (512 if cpu else 4096), prefill_step_ms=step_ms)


GPU_STEP_MS = 500
CPU_STEP_MS = 2000


@dataclass(frozen=True)
class StepPlan:
    prefill: list[tuple[Request, int]] = field(default_factory=list)  # (request, tokens this step)
    decode: list[Request] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.prefill and not self.decode


def admit(waiting: deque[Request], prefilling: list[Request], running: list[Request], cfg: SchedulerConfig,
          one_at_a_time: set[str] | frozenset[str] = frozenset(),
          fits: Callable[[list[int]], bool] | None = None) -> list[Request]:
    """First come, first served, while both the sequence and the prefill limits allow, and (``fits``,
    the memory budget: engine/memory.py) the KV the requests in flight reserve with the next one.
    Of the requests named in ``one_at_a_time`` (suspects after a failed step) at most one is in
    flight; the others keep their places while later requests go ahead."""
    admitted: list[Request] = []
    held: list[Request] = []
    busy = _suspect_in_flight(one_at_a_time, prefilling, running)
    while waiting and len(prefilling) + len(admitted) < cfg.max_prefilling:
        if len(prefilling) + len(admitted) + len(running) >= cfg.max_num_seqs:
            break
        if busy and waiting[0].id in one_at_a_time:
            held.append(waiting.popleft())
            continue
        if fits is not None and not fits([r.reserve for r in (*running, *prefilling, *admitted, waiting[0])]):
            break  # the head waits for room; nothing overtakes it
        req = waiting.popleft()
        busy = busy or req.id in one_at_a_time
        admitted.append(req)
    waiting.extendleft(reversed(held))
    return admitted


def _suspect_in_flight(one_at_a_time: set[str] | frozenset[str], *queues: list[Request]) -> bool:
    return bool(one_at_a_time) and any(r.id in one_at_a_time for queue in queues for r in queue)


def prefill_budget(prefill_chunk: int, decoding: int) -> int:
    """The step's prompt tokens: ``prefill_chunk`` less one token per decode row (a step's
    cost is the tokens it runs), but never under half of it, so prompts always go on."""
    return max(prefill_chunk - decoding, (prefill_chunk + 1) // 2)


RIDE_CHUNKS = 4  # whole short prompts may take a step up to this many chunks (see plan_prefill)
MIN_PACED_TOKENS = 16  # a paced step still moves a prompt on by this many tokens
SAMPLE_EVERY = 8  # steps that finish prompts are timed one in this many (the first always)


class PrefillPace:
    """How many prompt tokens fit in a step of ``target_s`` seconds, from the measured cost of
    the steps' prompt work so far (engine.prefill.PromptWork times it). The time of a step's
    prompt work includes the decode step queued ahead of it on the device, so the target bounds
    the whole step. The cost per token is an average that follows the latest steps (attention
    makes a long prompt's later tokens dearer)."""

    def __init__(self, target_s: float):
        self.target_s = target_s
        self.per_token_s: float | None = None
        self._unsampled = 0

    def wants_sample(self) -> bool:
        """Whether a step whose work is only queued should wait for it to be timed: the first
        such step, then one in SAMPLE_EVERY; never when pacing is off."""
        if self.target_s <= 0:
            return False
        self._unsampled += 1
        return self.per_token_s is None or self._unsampled >= SAMPLE_EVERY

    def record(self, tokens: int, seconds: float) -> None:
        if self.target_s <= 0 or tokens <= 0 or seconds <= 0:
            return
        self._unsampled = 0
        cost = seconds / tokens
        self.per_token_s = cost if self.per_token_s is None else (self.per_token_s + cost) / 2

    def limit(self) -> int | None:
        """The step's prompt tokens at the measured cost; None while nothing was measured or off."""
        if self.target_s <= 0 or self.per_token_s is None:
            return None
        return max(MIN_PACED_TOKENS, int(self.target_s / self.per_token_s))


def step_budget(cfg: SchedulerConfig, decoding: int, pace: PrefillPace) -> int:
    """The step's prompt tokens: :func:`prefill_budget`, and while rows decode at most what
    ``pace`` says fits in ``prefill_step_ms`` (a 7.6k-token prompt on a 2-core CPU took 15-28
    s a 512-token chunk, and a decoding request a token per chunk). With nothing decoding no
    one waits for a token: the whole chunk goes. Short prompts may ride beyond it (see
    :func:`plan_prefill`'s ``whole_up_to``)."""
    budget = prefill_budget(cfg.prefill_chunk, decoding)
    limit = pace.limit() if decoding else None
    return budget if limit is None else min(budget, limit)


def plan_prefill(prefilling: list[Request], budget: int, whole_up_to: int | None = None) -> list[tuple[Request, int]]:
    """The step's prompt work (see :func:`_share`) within ``budget`` tokens (the chunk, or
    what the pace allows while rows decode). With ``whole_up_to`` (the scheduler passes
    RIDE_CHUNKS chunks), fresh prompts that each fit ``budget`` on their own but did not get in
    ride whole beside it, shortest first, while the step stays within ``whole_up_to``: a wave of
    short prompts joins the decode batch at once instead of a few a step, so the rows of a
    closed-loop load (clients sending their next request when the last ends) stay in step and
    decode in full batches, as mlx-lm's batch generator keeps them. Pieces of long prompts
    stay within ``budget``: those are what starved decoding rows (one 512-token chunk deep
    into a 7.6k-token prompt took 15-28 s on a 2-core CPU) and what a request arriving meanwhile
    waits behind. At most ``max_prefilling`` prompts are in flight, so a step rides at most that
    many. Returned in arrival order."""
    plan = dict((id(req), n) for req, n in _share(prefilling, budget))
    if whole_up_to is not None and whole_up_to > budget:
        left = whole_up_to - sum(plan.values())
        for req in sorted(prefilling, key=lambda r: r.prompt_left):
            if id(req) not in plan and not _started(req) and req.prompt_left <= min(budget, left):
                plan[id(req)] = req.prompt_left
                left -= req.prompt_left
    return [(req, plan[id(req)]) for req in prefilling if id(req) in plan]


def _started(req: Request) -> bool:
    """Whether a prompt had a chunk of its own run (a prefix-cache hit alone has not started it)."""
    return req.num_prefilled > req.num_reused


def _share(prefilling: list[Request], budget: int) -> list[tuple[Request, int]]:
    """Split the step's prompt-token budget over prefilling requests. The one prefilling
    longest goes first: whole if it fits, else an equal share (so a long prompt always goes
    on). The rest goes shortest prompt first, each whole if it fits in what is left. Only a
    prompt too long to go whole in any step (more than a step leaves beside a long oldest one's
    share) or one already started (by a chunk of its own; not by a prefix-cache hit) takes a
    piece of what is left: one that could go whole waits
    for the next step rather than being split, so a burst of prompts runs
    as whole prompts prefilled together, none cut into passes of its own. A short prompt that
    arrives while a long one prefills is done in a step instead of waiting for all the long
    one's chunks. Returned in arrival order."""
    if not prefilling:
        return []
    shares = {id(req): 0 for req in prefilling}
    oldest = prefilling[0]
    first = oldest.prompt_left if oldest.prompt_left <= budget else budget // len(prefilling)
    shares[id(oldest)] = first
    left = budget - first
    room = budget if oldest.prompt_left <= budget else left  # the most a step leaves the others
    for req in sorted(prefilling, key=lambda r: r.prompt_left):  # stable: arrival order among equals
        need = req.prompt_left - shares[id(req)]
        splittable = req.prompt_left > room or _started(req) or shares[id(req)] > 0
        n = need if need <= left else (left if splittable else 0)
        shares[id(req)] += n
        left -= n
    return [(req, shares[id(req)]) for req in prefilling if shares[id(req)] > 0]


class Scheduler:
    """Owns the queues; the engine asks it for a plan each step."""

    def __init__(self, cfg: SchedulerConfig):
        self.cfg = cfg
        self.waiting: deque[Request] = deque()
        self.prefilling: list[Request] = []
        self.running: list[Request] = []
        self.one_at_a_time: set[str] = set()  # suspects after a failed step (see engine.recovery)
        self.pace = PrefillPace((cfg.prefill_step_ms or 0) / 1000)  # the engine sets it once resolved
        self.fits: Callable[[list[int]], bool] | None = None  # the memory budget's check, when there is one
        self.would_fit: Callable[[list[int]], bool] | None = None  # the same check, claiming nothing
        self.queued_work: list[Request] = []  # the waiting requests, replaced whole (read by any thread)
        # the memory budget's record of what the requests in flight hold, after one leaves
        self.settle: Callable[[list[int], bool], None] | None = None
        self.stalled = False  # nothing in flight and the queue's head waits on other engines' memory

    def add(self, req: Request) -> None:
        self.waiting.append(req)
        self._note()

    def _note(self) -> None:
        """Publish the waiting queue for the memory budget's checks; without a budget nobody reads it."""
        if self.fits is not None:
            self.queued_work = list(self.waiting)

    def schedule(self) -> StepPlan:
        for req in admit(self.waiting, self.prefilling, self.running, self.cfg, self.one_at_a_time, self.fits):
            req.status = RequestStatus.PREFILLING
            self.prefilling.append(req)
        self._note()
        self.stalled = bool(self.waiting) and not self.prefilling and not self.running
        budget = step_budget(self.cfg, len(self.running), self.pace)
        wave = RIDE_CHUNKS * prefill_budget(self.cfg.prefill_chunk, len(self.running))
        return StepPlan(prefill=plan_prefill(self.prefilling, budget, wave), decode=list(self.running))

    def admits_next(self) -> bool:
        """Whether the next ``schedule()`` would admit the head of the queue (``admit``'s limits:
        sequences, prompts prefilling at once, the memory budget), or, with a suspect in flight,
        the first request behind the suspects ``admit`` holds back. A request that waits on one of
        them is no reason for a step to stop short (engine/speculative_chain.py)."""
        inflight = [*self.running, *self.prefilling]
        if len(self.prefilling) >= self.cfg.max_prefilling or len(inflight) >= self.cfg.max_num_seqs:
            return False
        busy = _suspect_in_flight(self.one_at_a_time, inflight)
        head = next((r for r in self.waiting if not (busy and r.id in self.one_at_a_time)), None)
        return head is not None and (self.would_fit is None or self.would_fit([r.reserve for r in (*inflight, head)]))

    def start_running(self, req: Request) -> None:
        """A request whose prompt is done joins the decode batch."""
        self.prefilling.remove(req)
        req.status = RequestStatus.RUNNING
        self.running.append(req)

    def preempt(self, req: Request) -> None:
        """Back to the head of the waiting queue (its KV is gone; it will be prefilled again)."""
        for queue in (self.prefilling, self.running):
            if req in queue:
                queue.remove(req)
        req.status = RequestStatus.WAITING
        self.waiting.appendleft(req)
        self._note()
        self._settle()

    def finish(self, req: Request) -> None:
        self.one_at_a_time.discard(req.id)
        for queue in (self.prefilling, self.running):
            if req in queue:
                queue.remove(req)
        if req in self.waiting:
            self.waiting.remove(req)
            self._note()
        req.status = RequestStatus.FINISHED
        self._settle()

    def _settle(self) -> None:
        if self.settle is not None:
            self.settle([r.reserve for r in (*self.prefilling, *self.running)], bool(self.waiting))

    def find(self, request_id: str) -> Request | None:
        for req in (*self.waiting, *self.prefilling, *self.running):
            if req.id == request_id:
                return req
        return None

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.prefilling or self.running)

    def snapshot(self) -> dict:
        return {
            "waiting": [r.progress() for r in self.waiting],
            "prefilling": [r.progress() for r in self.prefilling],
            "running": [r.progress() for r in self.running],
        }
