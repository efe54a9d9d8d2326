"""One OpenAPI operation: request body (from a pydantic model or by hand) and responses."""

from __future__ import annotations

import re
from typing import Any

OBJECT = {"type": "object"}
JSON = "application/json"

SUMMARIES = {
    "/": "Liveness for probes (GET or HEAD): 200 and a line naming the server, even while the model loads.",
    "/health": "Liveness: 200 once the model is loaded, 503 while loading or shutting down.",
    "/v1/models": "The served models (the primary one, its aliases and the resident pool) with their state.",
    "/v1/models/{name}": "One served model (OpenAI's model object, or Anthropic's with an anthropic-version "
                         "header) with its state, context length, capabilities and quantization.",
    "/v1/models/{name}/load": "Load a pool model now.",
    "/v1/models/{name}/unload": "Unload a pool model no request is using (?force=true for a pinned one).",
    "/v1/status": "Scheduler queues with each request's progress, batch size, KV and memory figures.",
    "/metrics": "Prometheus metrics (text exposition format).",
    "/tokenize": "Token ids of a prompt or of chat messages rendered with the chat template.",
    "/detokenize": "The text of token ids.",
    "/openapi.json": "This document.",
    "/v1/embeddings": "OpenAI embeddings from the model serve --embedding-model names (float or base64).",
    "/v1/rerank": "Documents ordered by cosine similarity to the query (bi-encoder reranking).",
    "/api/chat": "Ollama chat: NDJSON lines by default (stream: false for one object); errors are {\"error\": ...}.",
    "/api/generate": "Ollama completion of a prompt (templated, or raw): NDJSON lines by default.",
    "/api/tags": "Ollama: the served models.",
    "/api/show": "Ollama: one served model's details, chat template and capabilities.",
    "/api/ps": "Ollama: the loaded models.",
    "/api/version": "Ollama: the server's version (mlxctl's).",
    "/api/embed": "Ollama embeddings (L2-normalised) from the model serve --embedding-model names.",
    "/api/embeddings": "Ollama's older embeddings endpoint: one prompt, one embedding.",
    "/api/pull": "Ollama pull: mlxctl model acquire into the model store, progress as NDJSON status lines.",
    "/v1/audio/transcriptions/stream": "Live transcription: POST a chunked PCM/WAV body (server-sent events "
                                       "back), or GET a WebSocket (binary audio in, JSON events out).",
}
ERROR = {"description": "An error in the protocol's shape", "content": {JSON: {"schema": OBJECT}}}
TEXT_RESPONSES = {"/metrics": "text/plain"}


def operation(path: str, method: str, model: type | None, components: dict[str, Any]) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": SUMMARIES.get(path, path), "operationId": operation_id(path, method),
                          "responses": responses(path)}
    if params := path_parameters(path):
        op["parameters"] = params
    if method == "post":
        schema = model_schema(model, components) if model is not None else OBJECT
        op["requestBody"] = {"required": True, "content": {JSON: {"schema": schema}}}
    return op


def path_parameters(path: str) -> list[dict[str, Any]]:
    """``{name}`` segments of an aiohttp path (``{name:regex}`` too) as OpenAPI parameters."""
    names = re.findall(r"{(\w+)(?::[^}]*)?}", path)
    return [{"name": n, "in": "path", "required": True, "schema": {"type": "string"}} for n in names]


def operation_id(path: str, method: str) -> str:
    words = [w for w in path.replace(".", "_").split("/") if w]
    return "_".join([method, *words]) or method


def responses(path: str) -> dict[str, Any]:
    media = TEXT_RESPONSES.get(path, JSON)
    schema = {"type": "string"} if media != JSON else OBJECT
    return {"200": {"description": "Success", "content": {media: {"schema": schema}}},
            "default": ERROR}


def model_schema(model: type, components: dict[str, Any]) -> dict[str, Any]:
    """The model's JSON schema with its definitions moved into ``components``."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    components.update(schema.pop("$defs", {}))
    components[model.__name__] = schema
    return {"$ref": f"#/components/schemas/{model.__name__}"}
