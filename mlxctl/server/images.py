"""Images and videos of a request, loaded before it is submitted (see docs/vision.md).

The model is checked first (a text-only model answers 400 "this model does not accept images"
before anything is fetched); then every image and video is fetched, read or decoded at once,
under the server's media policy, videos through the model's decoded-video cache. A bad one is a
400 that names its field. They are all decoded at once, so one request is bounded before anything
is fetched: at most MAX_MEDIA_PARTS images and videos, and videos whose ``max_frames`` add up to
at most MAX_REQUEST_FRAMES (each frame is a decoded image held until the request is submitted).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from aiohttp import web

from mlxctl.errors import MlxctlError
from mlxctl.server.errors import ApiError
from mlxctl.server.keys import SETTINGS
from mlxctl.vision import images_refused, vision_of
from mlxctl.vision.fetch import ImageRef, MediaPolicy, VideoSource, load_media

MAX_MEDIA_PARTS = 16  # images and videos in one request
MAX_REQUEST_FRAMES = 64  # video frames in one request: the sum of the videos' max_frames


def media_policy(request: web.Request) -> MediaPolicy:
    settings = request.app[SETTINGS]
    return MediaPolicy(local_root=settings.allowed_local_media_path, allow_http=settings.allow_remote_media)


async def load_images(request: web.Request, engine: Any, refs: Sequence[ImageRef | VideoSource]) -> tuple:
    """The images (ImageInput) and videos (VideoInput) of ``refs``, in order, loaded for
    ``engine``'s model; () without any."""
    if not refs:
        return ()
    if engine.model is None:
        raise ApiError(503, "the model is still loading", headers={"Retry-After": "5"})
    if vision_of(engine.model) is None:
        raise ApiError(400, images_refused(engine.model).message, param=content_field(refs[0].where),
                       code="images_not_supported")
    check_media_counts(refs)
    policy, videos = media_policy(request), getattr(vision_of(engine.model), "videos", None)
    try:
        return tuple(await asyncio.gather(*(load_media(ref, policy, videos) for ref in refs)))
    except MlxctlError as err:
        message = f"{err.message} ({err.hint})" if err.hint else err.message
        raise ApiError(400, message, param=getattr(err, "param", None)) from err


def check_media_counts(refs: Sequence[ImageRef | VideoSource]) -> None:
    """A 400 naming the first part over a request's limits: parts, then video frames (counted
    from each video's max_frames, the most it can yield, so nothing is decoded to find out)."""
    if len(refs) > MAX_MEDIA_PARTS:
        raise ApiError(400, f"the request has {len(refs)} image and video parts; at most {MAX_MEDIA_PARTS} "
                            "are allowed in one request", param=refs[MAX_MEDIA_PARTS].where,
                       code="too_many_media_parts")
    total, first_over = 0, None
    for ref in refs:
        if isinstance(ref, VideoSource):
            total += ref.sampling.max_frames
            first_over = first_over or (ref.where if total > MAX_REQUEST_FRAMES else None)
    if first_over is not None:
        raise ApiError(400, f"the request's videos may take up to {total} frames (their max_frames added "
                            f"up); at most {MAX_REQUEST_FRAMES} are allowed in one request: lower max_frames "
                            "or send fewer videos", param=first_over, code="too_many_video_frames")


def content_field(where: str) -> str:
    """The message content a media field is part of: messages.0.content.1.image_url.url ->
    messages.0.content, input.0.content.1.image_url -> input.0.content (what a text-only model
    cannot take)."""
    head, sep, _ = where.partition(".content.")
    return head + ".content" if sep else where


def image_token(engine: Any) -> str | None:
    vision = vision_of(engine.model) if engine.model is not None else None
    return None if vision is None else vision.image_token
