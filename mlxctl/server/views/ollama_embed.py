"""POST /api/embed and the older POST /api/embeddings (Ollama), from the model ``serve
--embedding-model`` names, as /v1/embeddings makes them (views/embeddings.py).

/api/embed's vectors are L2-normalised and inputs over the model's limit are cut unless
``truncate`` is false, as Ollama does; /api/embeddings embeds one ``prompt``, not normalised.
"""

from __future__ import annotations

import asyncio
import time

from aiohttp import web

from mlxctl.api.ollama_models import OllamaEmbeddingsRequest, OllamaEmbedRequest
from mlxctl.server.body import parse_body
from mlxctl.server.errors import ApiError
from mlxctl.server.views.embeddings import _fit, _floats, service_for


async def embed(request: web.Request) -> web.Response:
    started = time.perf_counter()
    body = await parse_body(request, OllamaEmbedRequest)
    service = service_for(request, body.model)
    embedder = await service.ready()
    loaded = time.perf_counter()
    if body.dimensions is not None and body.dimensions != embedder.dimensions:
        raise ApiError(400, f"dimensions must be {embedder.dimensions} for {service.name}: it was not trained for "
                            "shortened (Matryoshka) embeddings, so mlxctl does not truncate them", param="dimensions")
    fitted = await asyncio.to_thread(_fit, embedder, body.input, body.truncate)
    vectors = await service.embed(fitted.ids, normalize=True)
    return web.json_response({"model": body.model, "embeddings": [_floats(v) for v in vectors],
                              "total_duration": _ns(time.perf_counter() - started),
                              "load_duration": _ns(loaded - started), "prompt_eval_count": fitted.tokens})


async def embeddings(request: web.Request) -> web.Response:
    body = await parse_body(request, OllamaEmbeddingsRequest)
    service = service_for(request, body.model)
    embedder = await service.ready()
    fitted = await asyncio.to_thread(_fit, embedder, body.prompt, False, "prompt")
    vectors = await service.embed(fitted.ids)
    return web.json_response({"embedding": _floats(vectors[0])})


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)
