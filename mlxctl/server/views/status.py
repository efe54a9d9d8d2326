"""GET /v1/status (JSON for people and `mlxctl top`) and GET /metrics (Prometheus text)."""

from __future__ import annotations

from aiohttp import web

from mlxctl.server.keys import ENGINE, POOL, SETTINGS, STATE
from mlxctl.server.metrics import CONTENT_TYPE
from mlxctl.server.snapshot import EMPTY, engine_stats, kv_budget, memory


async def status(request: web.Request) -> web.Response:
    engine, state = request.app[ENGINE], request.app[STATE]
    stats = engine_stats(engine)
    return web.json_response({
        "model": request.app[SETTINGS].model_name,
        "loaded": engine.model is not None,
        "draining": state.draining,
        "uptime_s": round(state.uptime_s, 3),
        "http": {"in_flight": state.in_flight, "generations": len(state.streams)},
        "engine": {**stats, "num_waiting": len(stats["waiting"]),
                   "num_running": len(stats["running"]) + len(stats["prefilling"])},
        "memory": memory() if engine.model is not None else {},
        "warm_prompts": state.warm.as_dict() if state.warm is not None else None,
        "models": request.app[POOL].describe(),
    })


async def metrics(request: web.Request) -> web.Response:
    state, budget = request.app[STATE], kv_budget()
    state.metrics.set_engine(engine_stats(request.app[ENGINE]), budget)
    for resident in request.app[POOL].models.values():  # an unloaded one's gauges fall to 0
        stats = engine_stats(resident.engine) if resident.engine is not None else dict(EMPTY)
        state.metrics.set_engine(stats, budget, resident.name)
    state.metrics.set_memory(memory())
    body = state.metrics.render()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})
