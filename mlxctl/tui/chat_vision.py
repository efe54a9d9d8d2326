"""Sending a chat's images: OpenAI ``image_url`` parts to a daemon, the engine's images here.

The conversation keeps images as references (:mod:`mlxctl.tui.chat_images`); :func:`stream`
turns them into what the backend reads, every time a request is sent (the whole history goes
each time, so earlier images go again; their features come from the engine's caches):

* a daemon (any OpenAI-compatible server): the user message's content becomes parts, the
  images first as ``data:`` URLs, then the text, as `run --image` places them;
* the engine here: one image placeholder line per image before the text (what the server
  renders those parts to) and the decoded images handed to ``Engine.submit(images=...)``.

A text-only model refuses images with the engine's own message (``Engine.submit`` raises it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing
from typing import Any

from mlxctl.tui.chat_backend import Backend, BackendError, EngineBackend, Event
from mlxctl.tui.chat_images import Attachment, ImageStore
from mlxctl.tui.conversation import ChatSettings


def refused_here(backend: Backend) -> str | None:
    """Why the in-process model cannot take images (None: it can, or a daemon will say)."""
    if not isinstance(backend, EngineBackend) or backend.engine is None:
        return None
    from mlxctl.vision import images_refused, vision_of

    loaded = backend.engine.model
    return None if vision_of(loaded) is not None else images_refused(loaded).message


def stream(backend: Backend, messages: list[dict], settings: ChatSettings, store: ImageStore) -> AsyncIterator[Event]:
    """``backend.stream`` for request messages whose user turns may carry image references."""
    images: list[Attachment] = []
    plain: list[tuple[dict, list[Attachment]]] = []
    for message in messages:
        found = [a for ref in message.get("images") or () if (a := store.get(ref)) is not None]
        images += found
        plain.append(({k: v for k, v in message.items() if k != "images"}, found))
    if not images:
        return backend.stream([m for m, _ in plain], settings)
    if isinstance(backend, EngineBackend):
        return _engine_stream(backend, plain, settings, images)
    return backend.stream([_with_parts(m, found) for m, found in plain], settings)


def _with_parts(message: dict, images: list[Attachment]) -> dict:
    if not images:
        return message
    parts: list[dict] = [{"type": "image_url", "image_url": {"url": a.data_url()}} for a in images]
    return {**message, "content": [*parts, {"type": "text", "text": message.get("content") or ""}]}


async def _engine_stream(backend: EngineBackend, plain: list[tuple[dict, list[Attachment]]],
                         settings: ChatSettings, images: list[Attachment]) -> AsyncIterator[Event]:
    from mlxctl.vision import image_token

    real = backend.engine
    if real is None:
        raise BackendError("no model is loaded")
    token = image_token(real.model)
    messages = [m if not found or token is None else {**m, "content": _marks(token, len(found)) + (m.get("content") or "")}
                for m, found in plain]
    backend.engine = _Submitting(backend, real, [a.image for a in images])
    try:
        async with aclosing(backend.stream(messages, settings)) as events:
            async for event in events:
                yield event
    finally:
        if isinstance(backend.engine, _Submitting):  # it failed before submitting
            backend.engine = real


def _marks(token: str, count: int) -> str:
    return "".join(f"{token}\n" for _ in range(count))


class _Submitting:
    """The backend's engine for one request, whose ``submit`` carries the images.

    ``EngineBackend.stream`` takes no images; it reads ``backend.engine`` once, before its first
    await, and submits with no await in between. Standing in for the engine over that stretch
    (and putting the real one back as the submit happens) adds the images without a second copy
    of the rendering, reasoning split and timing code.
    """

    def __init__(self, backend: EngineBackend, engine: Any, images: Sequence[Any]):
        self._backend, self._engine, self._images = backend, engine, tuple(images)

    @property
    def model(self) -> Any:
        return self._engine.model

    def submit(self, tokens: list[int], params: Any, **kwargs: Any) -> Any:
        self._backend.engine = self._engine
        return self._engine.submit(tokens, params, images=self._images, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)
