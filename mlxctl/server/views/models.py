"""GET /v1/models and GET /v1/models/{id}: every served model with its residency state and what it
is (context length, capabilities, quantisation), in OpenAI's shapes, or in Anthropic's when the
request comes from an Anthropic client (``anthropic-version`` or ``x-api-key`` header)."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

from aiohttp import web

from mlxctl.server.errors import ApiError, anthropic_client
from mlxctl.server.keys import ENGINE, POOL, SETTINGS
from mlxctl.server.model_facts import UNKNOWN, model_facts

STARTED = int(time.time())
_OPENAI_KEYS = ("id", "object", "created", "owned_by")


async def models(request: web.Request) -> web.Response:
    data = entries(request.app)
    if anthropic_client(request):
        return web.json_response(anthropic_page([anthropic_entry(e) for e in data], request.query))
    return web.json_response({"object": "list", "data": data})


async def model(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    found = next((e for e in entries(request.app) if e["id"] == name), None)
    if found is None:
        served = ", ".join(f"'{e['id']}'" for e in entries(request.app))
        raise ApiError(404, f"model '{name}' not found: this server serves {served}", param="model",
                       code="model_not_found")
    return web.json_response(anthropic_entry(found) if anthropic_client(request) else found)


def entries(app: web.Application) -> list[dict[str, Any]]:
    """The primary model and its aliases, the resident pool, the embedding model."""
    settings, engine = app[SETTINGS], app[ENGINE]
    loaded = None if engine.asleep else engine.model  # (asleep: its facts are read again when it wakes)
    primary = {"state": "ready" if engine.model is not None else "loading", "pinned": True,
               **model_facts(app, loaded), "sampling_defaults": sampling_defaults(app, loaded)}
    if (pooled := app[POOL].get(settings.model_name)) is not None:  # --no-pin-primary: its pool state
        primary |= {k: v for k, v in pooled.describe().items() if k != "id"}
    data = [_entry(n, primary) for n in (settings.model_name, *settings.aliases)]
    for resident in app[POOL].models.values():
        if resident is pooled:
            continue
        loaded = getattr(resident.engine, "model", None) if resident.state == "ready" else None
        fields = {k: v for k, v in resident.describe().items() if k != "id"}
        data.append(_entry(resident.name, {**fields, **model_facts(app, loaded),
                                           "sampling_defaults": sampling_defaults(app, loaded, resident.sampling)}))
    from mlxctl.server.views.embeddings import listed_models

    data.extend({**UNKNOWN, **e} for e in listed_models(app, STARTED))  # serve --embedding-model
    return data


def sampling_defaults(app: web.Application, loaded: Any, configured: Any = None) -> dict[str, Any] | None:
    """What a request's omitted sampling fields take on this model (None while it is not loaded:
    its generation_config.json is read when it loads); ``configured``: its --models-config entry's."""
    from mlxctl.server.served_model import defaults_for

    return None if loaded is None else defaults_for(app, loaded, configured).effective(loaded.context_length)


def _entry(name: str, fields: dict[str, Any]) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": STARTED, "owned_by": "mlxctl", **fields}


def anthropic_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """Anthropic's ModelInfo; our fields after its own (``capabilities`` left out: Anthropic's is
    an object of its own features, not our list)."""
    context = entry.get("context_length")
    extras = {k: v for k, v in entry.items() if k not in (*_OPENAI_KEYS, "capabilities")}
    return {"type": "model", "id": entry["id"], "display_name": entry["id"], "created_at": _rfc3339(entry["created"]),
            "lifecycle": "active", "max_input_tokens": context - 1 if context else None,
            "max_tokens": context - 1 if context else None, **extras}


def anthropic_page(data: list[dict[str, Any]], query: Any) -> dict[str, Any]:
    """Anthropic's list page: ``after_id`` / ``before_id`` and ``limit`` (all models without it)."""
    ids, before = [e["id"] for e in data], query.get("before_id")
    if (after := query.get("after_id")) in ids:
        data = data[ids.index(after) + 1:]
    elif before in ids:
        data = data[:ids.index(before)]
    limit = _limit(query.get("limit"))
    page = data if not limit else data[-limit:] if before in ids else data[:limit]
    return {"data": page, "has_more": len(page) < len(data), "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None}


def _limit(value: str | None) -> int | None:
    if value is None:
        return None
    if not value.isdigit() or not 1 <= int(value) <= 1000:
        raise ApiError(400, f"limit must be an integer from 1 to 1000, got {value!r}", param="limit")
    return int(value)


def _rfc3339(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat().replace("+00:00", "Z")
