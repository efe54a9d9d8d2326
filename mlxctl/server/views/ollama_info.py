"""GET /api/tags, POST /api/show, GET /api/ps and GET /api/version (Ollama): the served models
(the /v1/models entries) in Ollama's shapes.

There is no registry: a model's ``digest`` is the sha256 of its served name, ``modelfile`` and
``parameters`` are empty, and ``template`` is the model's (Jinja) chat template.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta, timezone
from typing import Any

from aiohttp import web

from mlxctl import __version__
from mlxctl.api.ollama_models import OllamaShowRequest
from mlxctl.server.body import parse_body
from mlxctl.server.errors import ApiError
from mlxctl.server.keys import ENGINE, POOL, SETTINGS
from mlxctl.server.residency import weights_bytes
from mlxctl.server.views.models import entries
from mlxctl.server.views.ollama import ollama_name

# our capabilities -> Ollama's names
CAPABILITIES = {"chat": "completion", "tools": "tools", "reasoning": "thinking", "vision": "vision",
                "embeddings": "embedding"}


async def tags(request: web.Request) -> web.Response:
    return web.json_response({"models": [model_object(request.app, e) for e in entries(request.app)]})


async def ps(request: web.Request) -> web.Response:
    running = [e for e in entries(request.app) if e.get("state") == "ready"]
    return web.json_response({"models": [_running(request.app, e) for e in running]})


async def version(request: web.Request) -> web.Response:
    return web.json_response({"version": __version__})


async def show(request: web.Request) -> web.Response:
    body = await parse_body(request, OllamaShowRequest)
    if not body.model_name:
        raise ApiError(400, "model is required", param="model")
    entry = _entry(request.app, ollama_name(request, body.model_name))
    loaded = _loaded(request.app, entry["id"])
    config = getattr(loaded, "config", None) or {}
    arch = config.get("model_type", "")
    info: dict[str, Any] = {"general.architecture": arch}
    if entry.get("context_length"):
        info[f"{arch}.context_length"] = entry["context_length"]
    return web.json_response({
        "modelfile": "", "parameters": "", "license": "",
        "template": _template(loaded), "details": details(entry, arch), "model_info": info,
        "capabilities": [CAPABILITIES[c] for c in entry.get("capabilities") or () if c in CAPABILITIES],
        "modified_at": _rfc3339(entry["created"]),
    })


def model_object(app: web.Application, entry: dict[str, Any]) -> dict[str, Any]:
    loaded = _loaded(app, entry["id"])
    arch = (getattr(loaded, "config", None) or {}).get("model_type", "")
    return {"name": entry["id"], "model": entry["id"], "modified_at": _rfc3339(entry["created"]),
            "size": _size(app, entry), "digest": hashlib.sha256(entry["id"].encode()).hexdigest(),
            "details": details(entry, arch)}


def details(entry: dict[str, Any], arch: str) -> dict[str, Any]:
    return {"parent_model": "", "format": "mlx", "family": arch, "families": [arch] if arch else None,
            "parameter_size": "", "quantization_level": _quantization(entry.get("quantization"))}


def _running(app: web.Application, entry: dict[str, Any]) -> dict[str, Any]:
    keep, idle = entry.get("keep_alive_s"), entry.get("idle_s")
    expires = None
    if not entry.get("pinned") and keep is not None and idle is not None:
        expires = _iso(datetime.now(timezone.utc) + timedelta(seconds=max(0.0, keep - idle)))
    size = _size(app, entry)
    return {**model_object(app, entry), "expires_at": expires, "size_vram": size,
            "context_length": entry.get("context_length")}


def _entry(app: web.Application, name: str) -> dict[str, Any]:
    found = next((e for e in entries(app) if e["id"] == name), None)
    if found is None:
        raise ApiError(404, f"model '{name}' not found", param="model")
    return found


def _loaded(app: web.Application, name: str) -> Any:
    """The LoadedModel behind a served name (None: not loaded, or not a chat model)."""
    settings = app[SETTINGS]
    if name in (settings.model_name, *settings.aliases):
        return None if app[ENGINE].asleep else app[ENGINE].model
    resident = app[POOL].models.get(name)
    return getattr(resident.engine, "model", None) if resident is not None and resident.state == "ready" else None


def _size(app: web.Application, entry: dict[str, Any]) -> int:
    if entry.get("weights_bytes"):
        return entry["weights_bytes"]
    settings = app[SETTINGS]
    return weights_bytes(app[ENGINE]) if entry["id"] in (settings.model_name, *settings.aliases) else 0


def _template(loaded: Any) -> str:
    template = getattr(getattr(loaded, "tokenizer", None), "chat_template", None)
    return template if isinstance(template, str) else ""


def _quantization(quant: dict[str, Any] | None) -> str:
    if not quant:
        return ""
    if quant.get("quantized"):
        return f"Q{quant['bits']}" + ("_mixed" if quant.get("mixed") else "")
    return str(quant.get("dtype") or "").upper()


def _rfc3339(seconds: int) -> str:
    return _iso(datetime.fromtimestamp(seconds, timezone.utc))


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")
