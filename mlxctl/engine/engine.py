"""Engine: submit() -> RequestStream, abort(), and the step loop on the one MLX thread.

One step is schedule -> queue the decode step -> run prefill chunks -> emit the previous
step's tokens -> update the batch. Requests join and leave the batch at any step; a long
prompt is processed a chunk per step so the decoding of others goes on meanwhile.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from mlxctl.engine import memory, recovery, sleep, speculative_policy, speculative_step
from mlxctl.engine.batch import DecodeBatch
from mlxctl.engine.byte_detokenize import byte_table
from mlxctl.engine.events import FinishReason
from mlxctl.engine.inbox import Inbox
from mlxctl.engine.lifecycle import Lifecycle
from mlxctl.engine.limits import check_prompt, with_context_cap
from mlxctl.engine.kv_config import KVQuant
from mlxctl.engine.prefill import Joiner, PromptWork
from mlxctl.engine.prefix_config import PrefixConfig
from mlxctl.engine.request import Request
from mlxctl.engine.sampling import SamplingParams
from mlxctl.engine.scheduler import Scheduler, SchedulerConfig, resolve_auto
from mlxctl.engine.speculative import SpeculationConfig, SpeculationStats
from mlxctl.engine.step_trace import StepTrace
from mlxctl.engine.streams import RequestStream, delivered_together

log = logging.getLogger("mlxctl.engine")


@dataclass(frozen=True)
class EngineConfig:
    scheduler: SchedulerConfig = SchedulerConfig()
    prefix: PrefixConfig = PrefixConfig()
    clear_cache_every: int = 256  # steps between mx.clear_cache() calls
    # MLX's pool of freed buffers is returned after a batch change only once it holds more than
    # this (bytes). None: a tenth of the device's memory, at least 1 GiB; 0: after every change
    pool_cap_bytes: int | None = None
    max_retries: int = 3  # failed steps a request may be part of before it ends with an error
    retry_backoff_s: float = 0.05  # first pause after a failed step; doubles each time, at most 5 s
    fault_hook: Callable[[int], None] | None = None  # tests: called before each step, may raise
    speculation: SpeculationConfig = SpeculationConfig()  # --speculative (engine/speculative.py)
    kv: KVQuant = KVQuant()  # --kv-bits: running requests' KV quantised (engine/kv/quantized.py)
    max_model_len: int | None = None  # --max-model-len: the context requests may use (None: the model's)
    max_model_len_at_most: bool = False  # a default from serve's flag for a pool model: a shorter own context stays
    memory_budget_bytes: int | None = None  # --memory-budget-gb: weights, prefix cache and KV (engine/memory.py)
    memory_ledger: Any = None  # serve: the budget shared with the other models' engines (memory.MemoryLedger)
    memory_pinned: bool = False  # never unloaded: what it holds bounds the other engines' KV for good


class Engine(Inbox, Lifecycle):
    """The one engine behind `run`, `serve` and `chat`. Thread-safe to submit from anywhere.

    What reaches the engine thread goes through its inbox (engine/inbox.py); a request's tokens
    become events, and it finishes, in engine/lifecycle.py."""

    def __init__(self, load: Callable[[], Any], config: EngineConfig = EngineConfig()):
        self._load = load
        self.config = config
        self.scheduler = Scheduler(config.scheduler)
        self.batch = DecodeBatch()
        self.model: Any = None  # LoadedModel once started
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._unseen: dict[int, Request] = {}  # submitted, still in the inbox (see ``queued``)
        self._unseen_lock = threading.Lock()
        self._ids = itertools.count()
        self._ready = threading.Event()
        self._load_error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._steps = 0
        self._failures = 0  # failed steps in a row
        self._failures_total = 0
        self._preemptions = 0
        self.prefix: Any = None  # PrefixReuse, made on the engine thread
        self.speculation = SpeculationStats()
        self.draft: Any = None  # LoadedModel of --draft-model
        self.speculates = False  # set once the model is loaded: speculation asked for and possible
        self.memory: Any = None  # memory.KVBudget under --memory-budget-gb, once the model is loaded
        self._overhang = 0  # while a speculative step emits: cached tokens after the one being emitted
        self._emitted = 0  # tokens emitted so far (what a step did, for the speculation policy)
        self.spec_policy = speculative_policy.Policy()
        self.spec_width = 0  # the step's check width (pending token and drafts; 0: no check ran)
        self.spec_rows = speculative_step.MAX_ROWS  # the largest batch that speculates (set at load)
        self.spec_grow = ""  # growing ngram drafts: the backend that bounds them (set at load; "": off)
        self.spec_grow_alone = False  # and whether they grow only while a request is alone in the batch
        self.spec_replay = False  # recurrent layers go back by replaying the kept tokens (set at load)
        self.mixer_tap: Any = None  # mixer_replay.MixerTap: that replay by the recurrent mixers alone
        self.spec_mixer_replays = 0
        self.asleep = False  # the model's memory given back (engine/sleep.py); loaded again on wake
        self.trace = StepTrace.from_env()  # MLXCTL_STEP_TRACE: a line per step (engine/step_trace.py)

    # -- caller side ------------------------------------------------------------------------

    def start(self) -> "Engine":
        """Start the engine thread and wait until the model is loaded (or raise its error)."""
        self._thread = threading.Thread(target=self._main, name="mlxctl-engine", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._load_error is not None:
            self._join_thread(10.0)
            raise self._load_error
        return self

    def submit(self, prompt_tokens: list[int], params: SamplingParams, *, request_id: str | None = None,
               loop: asyncio.AbstractEventLoop | None = None, cache_salt: str = "",
               images: Sequence[Any] = (), group: Any = None) -> RequestStream:
        """Queue a request; read its events from the returned stream (async when ``loop``).

        ``images`` (``vision.images.ImageInput``, a vision model only): one per image placeholder
        token of the prompt, in order. Each placeholder is expanded to the image's feature
        positions, the prompt is prefilled from input embeddings with the features spliced in,
        and the prefix cache is keyed by the images' content hashes too. ``group``: what the
        request belongs to (an HTTP request's ``n`` choices): the memory budget does not count
        a request's siblings as others' queued work."""
        params.validate(self.vocab_size)
        speculative_step.check_request(self, params)
        spans: tuple = ()
        if images:
            prompt_tokens, spans, cache_salt = self._with_images(prompt_tokens, images, cache_salt)
        matcher = None
        if params.constraint is not None:  # an invalid schema / regex / grammar fails here, unqueued
            from mlxctl.engine.constraints import compile_constraint

            matcher = compile_constraint(params.constraint, self.model.tokenizer).matcher(self.vocab_size)
        max_new = check_prompt(len(prompt_tokens), params.max_tokens, self.model.context_length,
                               params.max_tokens_field)
        if self.memory is not None:
            max_new = self.memory.admit_alone(len(prompt_tokens), max_new, params.max_tokens_field)
        rid = request_id or f"req-{next(self._ids)}"
        stream = RequestStream(rid, self.abort, loop)
        req = Request(rid, list(prompt_tokens), params, stream, max_new, constraint=matcher,
                      cache_salt=cache_salt, images=tuple(images), image_spans=spans, group=group)
        self._enqueue(req)
        return stream

    def _with_images(self, tokens: list[int], images: Sequence[Any], salt: str) -> tuple[list[int], tuple, str]:
        from mlxctl.engine.kv.media import cache_salt as media_salt
        from mlxctl.vision import images_refused, vision_of

        vision = vision_of(self.model)
        if vision is None:
            raise images_refused(self.model)
        tokens, spans = vision.expand(tokens, images)
        return tokens, spans, "|".join(s for s in (salt, media_salt([img.key for img in images])) if s)

    def shutdown(self, timeout: float = 10.0) -> None:
        if self._thread is not None and self._thread.is_alive():
            self._inbox.put(("stop", None))
        self._join_thread(timeout)

    def _join_thread(self, timeout: float) -> None:
        """Wait for the engine's OS thread to be gone (see ``_wait_for_native_exit``)."""
        if self._thread is not None:
            self._thread.join(timeout)
            _wait_for_native_exit(self._thread.native_id, timeout)

    def __enter__(self) -> "Engine":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()

    def stats(self) -> dict:
        """A snapshot of queues and memory (read from any thread; values may be a step old)."""
        prefix = self.prefix.stats() if self.prefix is not None else {"enabled": False}  # (None asleep)
        vision = getattr(self.model, "vision", None)
        extra = {"vision": vision.stats()} if vision is not None else {}
        with self._unseen_lock:  # the inbox's requests wait too: the figures agree with ``queued``
            queues = self.scheduler.snapshot()
            queues["waiting"] += [r.progress() for r in self._unseen.values()]
        kv = self.config.kv
        return {"steps": self._steps, "batch_size": len(self.batch), "kv_bytes": self.batch.nbytes(),
                "kv_bits": kv.bits or None, "kv_group_size": kv.group_size if kv.enabled else None,
                "memory": memory.status(self),
                "failed_steps": self._failures_total, "preemptions": self._preemptions,
                "prefix_cache": prefix, "speculative": speculative_step.status(self), **extra, **queues}

    def sleep(self, timeout: float = 60.0) -> bool:
        """Give the model's memory back, keeping the engine (engine/sleep.py): only when idle;
        False when a request is queued or running."""
        return self._ask(sleep.sleep, timeout)

    def wake(self, timeout: float | None = None) -> None:
        """Load the model again after ``sleep`` (a no-op when awake); raises the load's error."""
        self._ask(sleep.wake, timeout)

    # -- engine thread ------------------------------------------------------------------------

    def _main(self) -> None:
        try:
            self._setup()
        except BaseException as exc:  # reported to start()'s caller
            self._load_error = exc
            self._ready.set()
            return
        self._ready.set()
        import mlx.core as mx

        # a stream of the engine's own, as mlx-lm's generate_step has (on CUDA the thread's
        # default stream measured 20% slower for a single stream)
        with mx.stream(mx.new_stream(mx.default_device())):
            self._loop()

    def _setup(self) -> None:
        """Load the model and build what runs it; any failure is raised by start()."""
        from mlxctl.engine.kv.quantized import check_model as check_kv
        from mlxctl.engine.prefix import PrefixReuse
        from mlxctl.engine.runner import ModelRunner

        self.model = with_context_cap(self._load(), self.config.max_model_len, self.config.max_model_len_at_most)
        self.vocab_size = _vocab_size(self.model)
        byte_table(self.model.tokenizer)  # built once per tokenizer: now, not in the first request's admission
        self.scheduler.cfg = resolve_auto(self.scheduler.cfg)
        self.scheduler.pace.target_s = self.scheduler.cfg.prefill_step_ms / 1000
        kv = check_kv(self.model.model, self.config.kv)  # where MLX cannot attend over it: dequantised
        self.runner = ModelRunner(self.model.model, getattr(self.model, "vision", None), kv)
        self.prefix = PrefixReuse(self.model, self.config.prefix, kv)
        self.prompts = PromptWork(self.runner, self.prefix, lambda req, exc: self._finish(req, FinishReason.ERROR, exc),
                                  self.scheduler.pace)
        cap = self.config.pool_cap_bytes
        self._pool_cap = default_pool_cap() if cap is None else cap
        speculative_step.setup(self)
        memory.setup(self)  # after the draft model: its weights count too

    def _loop(self) -> None:
        while self._drain_inbox(block=not self.scheduler.has_work or self.scheduler.stalled):
            if self.scheduler.has_work:
                self._safe_step()
        self._fail_all(FinishReason.ABORT, None)
        if self.trace is not None:
            self.trace.flush()
        import mlx.core as mx

        try:
            if self.prefix is not None:  # (None while asleep: closed then)
                self.prefix.close()  # what is cached in memory goes to the disk tier, if any
        except Exception:  # noqa: BLE001 - a cache that cannot be saved must not block shutdown
            log.exception("could not save the prefix cache")
        mx.synchronize()  # a queued step still running in MLX at exit aborts the process
        memory.leave(self)  # the last engine out puts the previous wired limit back

    def _safe_step(self) -> None:
        try:
            if self.config.fault_hook is not None:
                self.config.fault_hook(self._steps)
            self.step()
            self._failures = 0
            if self.scheduler.one_at_a_time:  # suspects that just got through a step are cleared
                self.scheduler.one_at_a_time -= {r.id for r in (*self.scheduler.prefilling, *self.scheduler.running)}
        except Exception as exc:  # a failed step never takes the engine down
            self._recover(exc)

    def _recover(self, error: Exception) -> None:
        """After a failed step: the requests in flight go back to the queue (engine/recovery.py).
        A tensor-parallel rank overrides it (distributed/lockstep.py)."""
        recovery.recover(self, error)

    def step(self) -> None:
        with delivered_together():  # a server's event loop wakes once for the step's events
            self._step()

    def _step(self) -> None:
        plan = self.scheduler.schedule()
        rows, start, emitted = len(self.batch), time.perf_counter(), self._emitted
        kv = self.batch.positions() if self.trace is not None else 0
        pending, checks, catch_up = None, 0, 0.0
        self.spec_width = 0
        speculative = speculative_step.wanted(self)
        if speculative:  # a step that found no draft counts too: it gave up the pipeline's overlap
            with self.prefix.together():
                checks, catch_up = speculative_step.speculate(self)
        elif rows:
            pending = self.batch.advance(*self._decode())
        joiners = self.prompts.run(plan.prefill)
        with self.prefix.together():  # the step's blocks copied in one evaluation
            if pending:
                self.batch.keep(self._emit(*pending))
            self.prompts.remember_held()
        for joiner in joiners:
            self._join(joiner)
        if self.speculates and rows and not plan.prefill:
            self.spec_policy.record(rows, speculative, self._emitted - emitted,
                                    time.perf_counter() - start - catch_up, checks)
        elif self.speculates and rows:
            self.spec_policy.skipped(speculative)
        self._housekeeping(changed=bool(joiners) or len(self.batch) < rows)
        if self.trace is not None:
            self.trace.record(start, rows, plan.prefill, sum(len(j.requests) for j in joiners),
                              self._emitted - emitted, speculative, self.spec_width or 1, kv)

    def _join(self, joiner: Joiner) -> None:
        self.prompts.hold(joiner)
        for req in joiner.requests:
            self.scheduler.start_running(req)
            req.cache = None
        first = joiner.first
        self.batch.join(joiner.requests, joiner.cache, first.tokens, list(first.per_row), joiner.batched, joiner.left)

    def _decode(self) -> tuple[Any, list[Any]]:
        nxt = self.runner.decode(self.batch)
        return nxt.tokens, list(nxt.per_row)

    def _housekeeping(self, changed: bool = False) -> None:
        """Return MLX's cached buffers now and then, and after a batch change once the pool is
        over its cap: each merge copies the KV caches into new buffers, and the pool would
        otherwise keep every old size (at 256 streams on the H200 that ran the GPU out of
        memory). Not after every change: on CUDA returning the pool waits for the device and the
        next step allocates its buffers anew."""
        self._steps += 1
        import mlx.core as mx

        if self._steps % self.config.clear_cache_every == 0 or \
                (changed and mx.get_cache_memory() > self._pool_cap):
            mx.clear_cache()


def default_pool_cap() -> int:
    """A tenth of the device's memory (the host's where MLX does not say), at least 1 GiB."""
    import mlx.core as mx

    info = mx.device_info()
    total = info.get("memory_size") or os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(1 << 30, int(total) // 10)


def _wait_for_native_exit(tid: int | None, timeout: float) -> None:
    """Wait until the OS thread is gone, not just its Python state (Linux; elsewhere a no-op).

    MLX's per-thread state is torn down after ``join()`` returns; if the interpreter starts
    finalizing meanwhile, that teardown aborts the process ("terminate called without an
    active exception")."""
    task = f"/proc/self/task/{tid}"
    deadline = time.monotonic() + timeout
    while tid and os.path.exists(task) and time.monotonic() < deadline:
        time.sleep(0.001)


def _vocab_size(loaded: Any) -> int:
    """Width of the logits row: the model config's vocab_size (text config for multimodal)."""
    config = getattr(loaded, "config", None) or {}
    size = config.get("vocab_size") or config.get("text_config", {}).get("vocab_size")
    return int(size or loaded.vocab_size)
