"""Media references in requests (images, videos) -> loaded inputs.

A reference is a URL (``data:image/...;base64,...``, ``https://...``, ``file://...``) or, for
Anthropic, base64 text with its media type. Remote media is fetched with httpx under a byte
limit and a time limit (the whole fetch, redirects included); ``file://`` URLs are refused unless
the server names a folder they may come from (``serve --allowed-local-media-path``), and then only
files inside it (after symlinks are resolved) are read. Decoding runs in a worker thread; a video
whose content and sampling are in the cache is not decoded again.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from mlxctl.engine.kv.media import content_digest, video_content_key
from mlxctl.vision.images import ImageInput, decode_image
from mlxctl.vision.sampling import VideoSampling
from mlxctl.vision.sources import (
    MEDIA_TYPES,
    MediaKind,
    MediaPolicy,
    base64_bytes,
    url_bytes,
)
from mlxctl.vision.video import VideoInput, decode_video

__all__ = ["MEDIA_TYPES", "ImageRef", "MediaPolicy", "VideoSource", "load_image", "load_media", "load_video"]


@dataclass(frozen=True)
class ImageRef:
    """An image as a request gives it: a URL, or base64 data (Anthropic's ``source``)."""

    where: str  # the field, for errors: messages.0.content.1.image_url.url
    url: str | None = None
    data: str | None = None  # base64 text
    media_type: str | None = None


@dataclass(frozen=True)
class VideoSource:
    """A video as a request gives it: a URL, and how to sample its frames."""

    where: str  # messages.0.content.1.video_url.url
    url: str
    sampling: VideoSampling = VideoSampling()


async def load_media(ref: ImageRef | VideoSource, policy: MediaPolicy = MediaPolicy(),
                     videos: Any = None) -> ImageInput | VideoInput:
    """An image or a video; ``videos``: a vision.video_cache.VideoCache, or None."""
    if isinstance(ref, VideoSource):
        return await load_video(ref, policy, videos)
    return await load_image(ref, policy)


async def load_image(ref: ImageRef, policy: MediaPolicy = MediaPolicy()) -> ImageInput:
    """Fetch (or read, or decode) ``ref``; an ImageError naming its field when anything is wrong."""
    kind = MediaKind("image", policy.limits.max_bytes)
    if ref.url is None:
        data = base64_bytes(ref.data or "", ref.where, kind, ref.media_type)
    else:
        data = await url_bytes(ref.url, ref.where, policy, kind)
    return await asyncio.to_thread(decode_image, data, ref.where, policy.limits)


async def load_video(ref: VideoSource, policy: MediaPolicy = MediaPolicy(), videos: Any = None) -> VideoInput:
    """Fetch (or read) and decode ``ref``'s sampled frames, from ``videos`` when it has them."""
    data = await url_bytes(ref.url, ref.where, policy, MediaKind("video", policy.video_limits.max_bytes))
    digest = await asyncio.to_thread(content_digest, data)
    found = videos.get(video_content_key(digest, ref.sampling.fps, ref.sampling.max_frames)) \
        if videos is not None else None
    if found is not None:
        return found
    video = await asyncio.to_thread(decode_video, data, ref.where, ref.sampling, policy.video_limits, digest)
    if videos is not None:
        videos.put(video)
    return video
