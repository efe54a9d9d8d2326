"""An idle engine gives its model's memory back and loads it again when asked (``serve
--no-pin-primary``: the primary model joins the resident pool, and is unloaded like any pool
model when idle past its keep-alive or to make room, but its engine stays the server's).

Asleep, the engine keeps its thread, its counters and a husk of the model (the tokenizer,
config and context length, which requests are prepared with; no weights, no vision tower, no
draft model). The prefix cache is closed as at shutdown (a disk tier keeps its blocks; memory
blocks are gone), the wired share is released and MLX's buffer pool emptied. Waking runs the
load again, as at start. Both run on the engine thread (``Engine.sleep`` / ``Engine.wake``)."""

from __future__ import annotations

import dataclasses
import gc
import logging
from typing import Any

log = logging.getLogger("mlxctl.engine")


def sleep(engine: Any) -> bool:
    """Unload ``engine``'s model if nothing is queued or running; False if something is (or
    it cannot: a tensor-parallel rank). True when it is asleep now."""
    if engine.asleep:
        return True
    with engine._unseen_lock:
        if engine.scheduler.has_work or engine._unseen or len(engine.batch):
            return False
    import mlx.core as mx

    from mlxctl.engine import memory

    try:
        engine.prefix.close()  # memory blocks go to the disk tier, if there is one
    except Exception:  # noqa: BLE001 - a cache that cannot be saved must not keep the memory
        log.exception("could not save the prefix cache")
    memory.leave(engine)
    engine.model = _husk(engine.model)
    engine.runner = engine.prompts = engine.prefix = engine.draft = None
    engine.memory = None
    engine.asleep = True
    gc.collect()
    mx.synchronize()
    mx.clear_cache()
    log.info("model %s unloaded (the engine sleeps until the next request)", engine.model.name)
    return True


def wake(engine: Any) -> None:
    """Load the model again (a no-op when awake); a failure is raised and it stays asleep."""
    if not engine.asleep:
        return
    engine._setup()
    engine.asleep = False
    log.info("model %s loaded again", engine.model.name)


def wake_for(engine: Any, req: Any) -> bool:
    """A request reached a sleeping engine (submitted without ``wake``): load, or end the request
    with the load's error (False)."""
    from mlxctl.engine.lifecycle import _as_engine_error
    from mlxctl.engine.events import FinishEvent, FinishReason

    try:
        wake(engine)
    except Exception as exc:  # noqa: BLE001 - the request ends with the load's error
        with engine._unseen_lock:
            engine._unseen.pop(id(req), None)
        req.stream.put(FinishEvent(FinishReason.ERROR, req.usage(), req.timings(), "", _as_engine_error(exc)))
        return False
    return True


def _husk(loaded: Any) -> Any:
    """``loaded`` without its weights (and vision tower): what requests are prepared with."""
    names = {f.name for f in dataclasses.fields(loaded)}
    return dataclasses.replace(loaded, **{name: None for name in ("model", "vision") if name in names})
