"""The OpenAPI 3.1 description of what this app serves, built from its route table.

Request schemas come from the pydantic request models (``mlxctl.api.*_models`` for the
protocols, imported by module name so that a missing module only makes a schema generic);
summaries and responses are described by hand in openapi_paths.py.
"""

from __future__ import annotations

import importlib
from typing import Any

from aiohttp import web

from mlxctl import __version__
from mlxctl.server.openapi_paths import operation

# path -> (module, candidate class names) of its pydantic request model
PROTOCOL_MODELS = {
    "/v1/chat/completions": ("mlxctl.api.openai_models", ("ChatCompletionRequest", "ChatRequest")),
    "/v1/completions": ("mlxctl.api.openai_models", ("CompletionRequest",)),
    "/v1/messages": ("mlxctl.api.anthropic_models", ("MessagesRequest", "MessageRequest", "CreateMessageRequest")),
    "/v1/messages/count_tokens": ("mlxctl.api.anthropic_models", ("CountTokensRequest", "TokenCountRequest")),
    "/v1/responses": ("mlxctl.api.responses_models", ("ResponsesRequest", "ResponseRequest", "CreateResponseRequest")),
    "/tokenize": ("mlxctl.server.views.tokenize", ("TokenizeRequest",)),
    "/detokenize": ("mlxctl.server.views.tokenize", ("DetokenizeRequest",)),
    "/v1/embeddings": ("mlxctl.server.views.embeddings", ("EmbeddingsRequest",)),
    "/v1/rerank": ("mlxctl.server.views.embeddings", ("RerankRequest",)),
    "/api/chat": ("mlxctl.api.ollama_models", ("OllamaChatRequest",)),
    "/api/generate": ("mlxctl.api.ollama_models", ("OllamaGenerateRequest",)),
    "/api/show": ("mlxctl.api.ollama_models", ("OllamaShowRequest",)),
    "/api/embed": ("mlxctl.api.ollama_models", ("OllamaEmbedRequest",)),
    "/api/embeddings": ("mlxctl.api.ollama_models", ("OllamaEmbeddingsRequest",)),
    "/api/pull": ("mlxctl.api.ollama_models", ("OllamaPullRequest",)),
}


def request_model(path: str) -> type | None:
    """The pydantic request model for a protocol path, when its module defines one."""
    module_name, names = PROTOCOL_MODELS.get(path, ("", ()))
    try:
        module = importlib.import_module(module_name) if module_name else None
    except ImportError:
        return None
    return next((getattr(module, n) for n in names if hasattr(module, n)), None)


def routes(app: web.Application) -> list[tuple[str, str]]:
    """(path, method) for each route, HEAD and OPTIONS left out."""
    found = []
    for route in app.router.routes():
        info = route.resource.get_info() if route.resource else {}
        path = info.get("path") or info.get("formatter")
        if path and route.method not in ("HEAD", "OPTIONS", "*"):
            found.append((path, route.method.lower()))
    return found


def build(app: web.Application) -> dict[str, Any]:
    components: dict[str, Any] = {}
    paths: dict[str, Any] = {}
    for path, method in routes(app):
        paths.setdefault(path, {})[method] = operation(path, method, request_model(path), components)
    return {
        "openapi": "3.1.0",
        "info": {"title": "mlxctl", "version": __version__,
                 "description": "OpenAI-, Anthropic- and Responses-compatible API served by `mlxctl serve`."},
        "paths": paths,
        "components": {"schemas": components, "securitySchemes": {
            "bearer": {"type": "http", "scheme": "bearer"},
            "apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key"}}},
    }
