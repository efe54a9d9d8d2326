"""POST /v1/embeddings (OpenAI) and POST /v1/rerank (Cohere/Jina style, bi-encoder).

The embedding model is the one ``serve --embedding-model`` names; it loads on its own thread
when the app starts (``mlxctl.embed.service``), and a request that arrives first waits for it.
Without that flag these endpoints answer 404 for every model.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any, Literal

import numpy as np
import pydantic
from aiohttp import web

from mlxctl.errors import BadInputError
from mlxctl.server.body import parse_body
from mlxctl.server.errors import ApiError
from mlxctl.server.keys import SETTINGS

EMBEDDINGS = web.AppKey("embeddings", Any)  # mlxctl.embed.service.EmbeddingService, or None
TRUNCATE_HINT = 'shorten it, or send "truncate": true to cut it to the limit'
MAX_INPUTS = 2048  # per request, as OpenAI allows

Input = str | list[str] | list[int] | list[list[int]]


def _check_input(value: object) -> object:
    """The four OpenAI shapes, strictly: a string, strings, token ids, or lists of token ids."""
    def is_id(x: object) -> bool:
        return isinstance(x, int) and not isinstance(x, bool)

    if isinstance(value, str):
        return value
    if isinstance(value, list):
        if all(isinstance(x, str) for x in value) or all(is_id(x) for x in value):
            return value
        if all(isinstance(x, list) and all(is_id(t) for t in x) for x in value):
            return value
    raise ValueError("must be a string, a list of strings, a list of token ids or a list of token-id lists")


class EmbeddingsRequest(pydantic.BaseModel):
    """OpenAI's embeddings request; ``truncate`` is an mlxctl extension."""

    model_config = pydantic.ConfigDict(extra="forbid")
    input: Input
    model: str | None = None  # None: the served embedding model
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = pydantic.Field(default=None, ge=1)
    user: str | None = None  # advisory
    truncate: bool = False  # cut inputs over the model's limit instead of refusing them

    _input = pydantic.field_validator("input", mode="before")(_check_input)


class RerankDocument(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    text: str


class RerankRequest(pydantic.BaseModel):
    """Cohere/Jina-style rerank: documents ordered by cosine similarity to the query."""

    model_config = pydantic.ConfigDict(extra="forbid")
    query: str
    documents: list[str | RerankDocument]
    model: str | None = None
    top_n: int | None = pydantic.Field(default=None, ge=1)
    return_documents: bool = True
    truncate: bool = False


def setup(app: web.Application) -> None:
    """The routes, and the model's thread started and stopped with the app."""
    from mlxctl.embed.service import EmbeddingService

    ref = app[SETTINGS].embedding_model
    app[EMBEDDINGS] = EmbeddingService(ref) if ref else None
    app.router.add_post("/v1/embeddings", embeddings)
    app.router.add_post("/v1/rerank", rerank)
    app.on_startup.append(_start)
    app.on_cleanup.append(_stop)


async def _start(app: web.Application) -> None:
    if (service := app[EMBEDDINGS]) is not None:
        await asyncio.to_thread(service.import_runtime)  # before the chat engine's thread imports
        service.start()


async def _stop(app: web.Application) -> None:
    if (service := app[EMBEDDINGS]) is not None:
        await asyncio.to_thread(service.close)


async def embeddings(request: web.Request) -> web.Response:
    body = await parse_body(request, EmbeddingsRequest)
    service = service_for(request, body.model)
    embedder = await service.ready()
    if body.dimensions is not None and body.dimensions != embedder.dimensions:
        raise ApiError(
            400,
            f"'dimensions' must be {embedder.dimensions} for {service.name}: it was not trained for "
            "shortened (Matryoshka) embeddings, so mlxctl does not truncate them",
            param="dimensions",
        )
    fitted = await asyncio.to_thread(_fit, embedder, body.input, body.truncate)
    vectors = await service.embed(fitted.ids)
    encode = _base64 if body.encoding_format == "base64" else _floats
    data = [{"object": "embedding", "index": i, "embedding": encode(v)} for i, v in enumerate(vectors)]
    usage = {"prompt_tokens": fitted.tokens, "total_tokens": fitted.tokens}
    return web.json_response({"object": "list", "data": data, "model": service.name, "usage": usage})


async def rerank(request: web.Request) -> web.Response:
    body = await parse_body(request, RerankRequest)
    service = service_for(request, body.model)
    embedder = await service.ready()
    if not body.query.strip():
        raise ApiError(400, "'query' is empty", param="query")
    if not body.documents:
        raise ApiError(400, "'documents' is empty", param="documents")
    texts = [d if isinstance(d, str) else d.text for d in body.documents]
    for i, text in enumerate(texts):
        if not text.strip():
            raise ApiError(400, f"document {i} is empty", param="documents")
    query = await asyncio.to_thread(_fit, embedder, body.query, body.truncate, "query")
    docs = await asyncio.to_thread(_fit, embedder, texts, body.truncate, "documents")
    vectors = await service.embed([*query.ids, *docs.ids], normalize=True)
    scores = vectors[1:] @ vectors[0]
    order = np.argsort(-scores, kind="stable")[: body.top_n or len(texts)]
    results = []
    for i in order:
        item: dict[str, Any] = {"index": int(i), "relevance_score": float(scores[i])}
        if body.return_documents:
            item["document"] = {"text": texts[i]}
        results.append(item)
    tokens = query.tokens + docs.tokens
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return web.json_response({"object": "list", "model": service.name, "results": results, "usage": usage})


def service_for(request: web.Request, name: str | None):
    """The embedding service a request names (None: the served one), else a 404 or 400."""
    service = request.app.get(EMBEDDINGS)
    settings = request.app[SETTINGS]
    chat_names = (settings.model_name, *settings.aliases)
    if service is not None and name in (None, service.name):
        return service
    if name in chat_names:
        raise ApiError(400, f"'{name}' is a chat model and makes no embeddings"
                       + (f": use '{service.name}'" if service else ": start serve with --embedding-model"),
                       param="model")
    if service is None:
        raise ApiError(404, f"model '{name}' not found: this server serves no embedding model "
                       "(start it with --embedding-model)", param="model", code="model_not_found")
    raise ApiError(404, f"model '{name}' not found: embeddings come from '{service.name}'",
                   param="model", code="model_not_found")


def _fit(embedder, value: Input, truncate: bool, param: str = "input"):
    """Ids of every input, fitted to the model's limit; a 400 naming ``param`` otherwise."""
    try:
        if isinstance(value, str):
            if not value.strip():
                raise BadInputError(f"'{param}' is empty")
            return embedder.prepare([value], truncate=truncate, hint=TRUNCATE_HINT)
        if not value:
            raise BadInputError(f"'{param}' is an empty list")
        if not isinstance(value[0], int) and len(value) > MAX_INPUTS:
            raise BadInputError(f"'{param}' holds {len(value)} inputs; at most {MAX_INPUTS} per request")
        if isinstance(value[0], str):
            return embedder.prepare(value, truncate=truncate, hint=TRUNCATE_HINT)
        lists = [value] if isinstance(value[0], int) else value
        for i, ids in enumerate(lists):
            if not ids:
                raise BadInputError(f"input {i} is an empty list of token ids")
        return embedder.fit(embedder.tokens.from_ids(lists), truncate=truncate, hint=TRUNCATE_HINT)
    except BadInputError as exc:
        message = f"{exc.message} ({exc.hint})" if exc.hint else exc.message
        raise ApiError(400, message, param=param) from exc


def _floats(vector: np.ndarray) -> list[float]:
    return vector.astype(np.float32).tolist()


def _base64(vector: np.ndarray) -> str:
    """OpenAI's base64 form: the little-endian float32 bytes."""
    return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")


def listed_models(app: web.Application, created: int) -> list[dict[str, Any]]:
    """The embedding model's /v1/models entry (none without --embedding-model)."""
    service = app.get(EMBEDDINGS)
    if service is None:
        return []
    state = "ready" if service.loaded else "failed" if service.failed else "loading"
    return [{"id": service.name, "object": "model", "created": created, "owned_by": "mlxctl",
             "state": state, "pinned": True, "kind": "embed", "capabilities": ["embeddings"]}]
