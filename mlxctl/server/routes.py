"""The one route table."""

from __future__ import annotations

from aiohttp import web

from mlxctl.server.mcp_service import close_mcp
from mlxctl.server.views import embeddings
from mlxctl.server.views import audio
from mlxctl.server.views import (
    anthropic,
    cache,
    health,
    mcp,
    models,
    ollama,
    ollama_embed,
    ollama_info,
    ollama_pull,
    openai,
    openapi,
    responses,
    root,
    status,
    tokenize,
)


def setup_routes(app: web.Application) -> None:
    app.router.add_get("/", root.root)  # also HEAD: liveness probes (Ollama clients') ask HEAD / and GET /
    app.router.add_get("/health", health.health)
    app.router.add_get("/v1/models", models.models)
    app.router.add_get("/v1/models/{name:.+}", models.model)  # .+: pool names may hold a slash (org/model)
    app.router.add_post("/v1/models/{name}/load", health.load_model)
    app.router.add_post("/v1/models/{name}/unload", health.unload_model)
    app.router.add_post("/v1/chat/completions", openai.chat_completions)
    app.router.add_get("/v1/mcp/tools", mcp.tools)
    app.on_cleanup.append(close_mcp)  # the MCP hub (serve --mcp-config) ends with the app
    app.router.add_post("/v1/completions", openai.completions)
    app.router.add_get("/v1/status", status.status)
    app.router.add_get("/metrics", status.metrics)
    app.router.add_get("/v1/cache/stats", cache.cache_stats)
    app.router.add_delete("/v1/cache", cache.clear_cache)
    app.router.add_post("/tokenize", tokenize.tokenize)
    app.router.add_post("/detokenize", tokenize.detokenize)
    app.router.add_get("/openapi.json", openapi.openapi_json)
    app.router.add_post("/v1/messages", anthropic.messages)
    app.router.add_post("/v1/messages/count_tokens", anthropic.count_tokens)
    app.router.add_post("/v1/responses", responses.create)
    app.router.add_get("/v1/responses/{response_id}", responses.retrieve)
    app.router.add_delete("/v1/responses/{response_id}", responses.delete)
    _ollama_routes(app)
    embeddings.setup(app)  # /v1/embeddings, /v1/rerank and the embedding model's thread
    audio.setup(app)  # /v1/audio/transcriptions, /speech and /voices, each audio model on its own thread


def _ollama_routes(app: web.Application) -> None:
    """Ollama's REST API (docs/serve.md, "Ollama API"); its errors are ``{"error": "..."}``."""
    app.router.add_post("/api/chat", ollama.chat)
    app.router.add_post("/api/generate", ollama.generate)
    app.router.add_get("/api/tags", ollama_info.tags)
    app.router.add_post("/api/show", ollama_info.show)
    app.router.add_get("/api/ps", ollama_info.ps)
    app.router.add_get("/api/version", ollama_info.version)
    app.router.add_post("/api/embed", ollama_embed.embed)
    app.router.add_post("/api/embeddings", ollama_embed.embeddings)
    app.router.add_post("/api/pull", ollama_pull.pull)
