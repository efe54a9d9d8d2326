"""A model the server runs outside the chat engine: one thread of its own, its own MLX stream,
loaded once (at start when a flag names it, else on the first request that needs it).

The speech-to-text and text-to-speech endpoints each hold one; a subclass only says how its
model is opened. A model that cannot be loaded is a 503 for the requests that need it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from mlxctl.errors import MlxctlError
from mlxctl.server.errors import ApiError

log = logging.getLogger("mlxctl.server")


def served_name(ref: str) -> str:
    """The name a model reference is served under: a folder's name, else the reference."""
    path = Path(ref).expanduser()
    return path.resolve().name if path.exists() else ref.strip()


class ModelThread:
    label = ""  # short, for thread names and logs: "stt", "tts"
    kind = ""  # the catalog kind whose default model serves when no reference is given
    what = ""  # for messages: "speech-to-text"

    def __init__(self, ref: str | None):
        from mlxctl.models.catalog import default_model

        self.ref = ref
        self.name = served_name(ref) if ref else default_model(self.kind)
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"mlxctl-{self.label}")
        self._model: Any = None
        self._stream: Any = None

    def start(self) -> None:
        """Begin loading now (a failure is reported to the requests that need the model)."""
        self._executor.submit(self._quiet_load)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(model, *args)`` on the model's thread, the model loaded first."""
        return await self.run(partial(self._job, fn, *args))

    async def run(self, fn: Callable[[], Any]) -> Any:
        """``fn()`` on the model's thread (the model not necessarily loaded)."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    def _open(self) -> tuple[Any, Path]:
        """Find and load the model: (model, where it was loaded from). Runs on the model's thread."""
        raise NotImplementedError

    def unavailable(self, err: MlxctlError) -> ApiError:
        return ApiError(503, f"the {self.what} model {self.name} could not be loaded: {err.message}",
                        code="model_not_loaded")

    def progress(self, message: str) -> None:
        log.info("%s: %s", self.label, message)

    def _job(self, fn: Callable[..., Any], *args: Any) -> Any:
        import mlx.core as mx

        if self._stream is None:
            self._stream = mx.new_stream(mx.default_device())
        with mx.stream(self._stream):
            return fn(self._load(), *args)

    def _load(self) -> Any:
        if self._model is None:
            try:
                self._model, where = self._open()
            except MlxctlError as err:
                raise self.unavailable(err) from err
            log.info("%s: %s loaded from %s", self.label, self.name, where)
        return self._model

    def _quiet_load(self) -> None:
        import mlx.core as mx

        try:
            self._stream = mx.new_stream(mx.default_device())
            with mx.stream(self._stream):
                self._load()
        except Exception as exc:  # noqa: BLE001 (the requests report it)
            log.warning("%s: %s", self.label, getattr(exc, "message", exc))
