"""The models this server answers to, per request: the primary one (``serve -m``, its served name
and aliases) and the resident pool's (``serve -m NAME=REF``). Any other name is a 404, unless
the pool admits it (``serve --allow-unconfigured-models``)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from mlxctl.errors import BadInputError, MlxctlError
from mlxctl.server.errors import ApiError
from mlxctl.server.keys import ENGINE, POOL, SETTINGS, STATE

REQUEST_ENGINE = "mlxctl.engine"  # the engine a request resolved to (request-scoped)
REQUEST_LEASES = "mlxctl.leases"  # residency leases the request holds until its response is done


def served_names(app: web.Application) -> list[str]:
    settings = app[SETTINGS]  # (the primary is a pool model too under --no-pin-primary)
    return [settings.model_name, *settings.aliases, *(n for n in app[POOL].models if n != settings.model_name)]


def check_model(request: web.Request, name: str) -> None:
    if name in served_names(request.app):
        return
    why = request.app[POOL].admit(name)  # serve --allow-unconfigured-models; None: now a pool model
    if why is not None:
        names = ", ".join(f"'{n}'" for n in served_names(request.app))
        raise ApiError(404, f"model '{name}' not found: this server serves {names}" + (f" ({why})" if why else ""),
                       param="model", code="model_not_found")


def check_side_model(name: str | None, served: str, aliases: tuple[str, ...], doing: str) -> None:
    """A model named in a request to a one-model endpoint (speech, transcription): the served
    model or one of OpenAI's ids for that job; a 404 otherwise."""
    if name is not None and name not in (served, *aliases):
        raise ApiError(404, f"model '{name}' not found: this server {doing} with '{served}' "
                            f"(or say {', '.join(aliases)})", param="model", code="model_not_found")


async def use_model(request: web.Request, name: str, keep_alive: Any = None) -> Any:
    """The engine for ``name``, loaded (a pool model is leased until the response is done)."""
    check_model(request, name)
    settings, pool = request.app[SETTINGS], request.app[POOL]
    primary = name in (settings.model_name, *settings.aliases)
    if primary and pool.get(settings.model_name) is None:  # pinned: always loaded
        if keep_alive is not None:
            _check_keep_alive(keep_alive)
        engine = request.app[ENGINE]
    else:
        try:
            resident = await pool.lease(settings.model_name if primary else name, keep_alive)
        except MlxctlError as err:
            if isinstance(err, BadInputError):
                raise ApiError(400, err.message, param="keep_alive") from err
            raise ApiError(503, f"model '{name}' could not be loaded: {err.message}") from err
        request[REQUEST_LEASES] = [*request.get(REQUEST_LEASES, []), resident]
        engine = resident.engine
    request[REQUEST_ENGINE] = engine
    return engine


def _check_keep_alive(value: Any) -> None:
    from mlxctl.server.residency import parse_keep_alive

    try:
        parse_keep_alive(value)
    except MlxctlError as err:
        raise ApiError(400, err.message, param="keep_alive") from err


def release_models(request: web.Request) -> None:
    pool = request.app[POOL]
    for resident in request.get(REQUEST_LEASES, ()):
        pool.release(resident)
    request[REQUEST_LEASES] = []


def engine_of(request: web.Request) -> Any:
    """The engine the request resolved to with ``use_model`` (the primary one otherwise)."""
    return request.get(REQUEST_ENGINE) or request.app[ENGINE]


def served_name(request: web.Request) -> str:
    """The name of the model the request resolved to: its pool name, else the primary's served
    name (never an alias), as /metrics labels it."""
    engine = engine_of(request)
    for resident in request.app[POOL].models.values():
        if resident.engine is engine:
            return resident.name
    return request.app[SETTINGS].model_name


def model_formats(request: web.Request) -> Any:
    """The request's model's tool-call and reasoning formats, detected once per tokenizer."""
    return formats_for(request.app, engine_of(request).model.tokenizer)


def formats_for(app: web.Application, tokenizer: Any) -> Any:
    """A model's tool-call and reasoning formats, from its tokenizer (cached per tokenizer)."""
    from mlxctl.api.chat_plan import ModelFormats

    settings, state = app[SETTINGS], app[STATE]
    cached = state.formats.get(id(tokenizer)) if state.formats else None
    if cached is None or cached[0] is not tokenizer:
        cached = (tokenizer, ModelFormats.detect(tokenizer, settings.tool_call_parser, settings.reasoning_parser))
        state.formats = {**(state.formats or {}), id(tokenizer): cached}
    return cached[1]


def sampling_defaults(request: web.Request) -> Any:
    """What the request's omitted sampling fields take: the model's --models-config entry, else the
    serve flags, else the model's generation_config.json (api/sampling_defaults.py)."""
    engine = engine_of(request)
    resident = next((r for r in request.app[POOL].models.values() if r.engine is engine), None)
    return defaults_for(request.app, engine.model, resident.sampling if resident is not None else None)


def defaults_for(app: web.Application, loaded: Any, configured: Any = None) -> Any:
    """``configured`` (a pool model's config entry, a SamplingDefaults) over the serve flags'
    defaults over those of ``loaded``'s generation_config.json (a LoadedModel)."""
    from mlxctl.api.sampling_defaults import NO_DEFAULTS, from_generation_config

    config = getattr(loaded, "generation_config", None) or {}
    flags = app[SETTINGS].sampling_defaults.over(from_generation_config(config))
    return (configured or NO_DEFAULTS).over(flags)
