"""The aiohttp application factory."""

from __future__ import annotations

from aiohttp import web

from mlxctl.engine.engine import Engine
from mlxctl.server import middlewares
from mlxctl.server.access_log import access_log
from mlxctl.server.auth import auth
from mlxctl.server.cors import add_cors_headers, cors_preflight
from mlxctl.server.keys import ENGINE, POOL, SETTINGS, STATE
from mlxctl.server.residency import ModelPool, weights_bytes
from mlxctl.server.metrics import Metrics
from mlxctl.server.ratelimit import rate_limit
from mlxctl.server.response_keys import install_response_store
from mlxctl.server.routes import setup_routes
from mlxctl.server.settings import ServeSettings
from mlxctl.server.state import ServerState

# outermost first: log everything, answer CORS preflights before auth, turn errors from the
# rest into protocol bodies, refuse work while draining, the limits, the key check, and
# model endpoints while the model loads
MIDDLEWARES = (access_log, cors_preflight, middlewares.errors, middlewares.track, middlewares.body_limit,
               rate_limit, auth, middlewares.loading, middlewares.leases)


def init_app(engine: Engine, settings: ServeSettings = ServeSettings(), pool: ModelPool | None = None) -> web.Application:
    """``engine`` serves ``settings.model_name``; ``pool`` holds the other models, if any."""
    app = web.Application(middlewares=MIDDLEWARES, client_max_size=settings.max_body_bytes)
    app[ENGINE] = engine
    app[POOL] = pool or ModelPool()
    if not settings.pin_primary:
        app[POOL].add_primary(settings.model_name, engine)
    else:  # its weights count in --max-loaded-gb too
        app[POOL].outside = lambda: weights_bytes(engine)
    app[SETTINGS] = settings
    app[STATE] = ServerState(metrics=Metrics(settings.model_name, prefix_cache=True, names=settings.metrics_names))
    install_response_store(app)  # the state behind the /v1/responses routes
    app.on_response_prepare.append(add_cors_headers)
    setup_routes(app)
    return app
