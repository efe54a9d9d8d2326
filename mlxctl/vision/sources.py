"""Bytes of an image or a video from where a request says it is: a ``data:`` URL, base64 text,
a ``file://`` URL inside the server's media folder, or, when the server allows remote media, an
``http(s)://`` URL fetched from a public internet address under a byte limit and a time limit
(vision/remote_fetch.py). Every failure is an ImageError naming the request field.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from mlxctl.vision.images import ImageError, ImageLimits, read_limited
from mlxctl.vision.remote_fetch import fetch_remote
from mlxctl.vision.video import MEDIA_PREFIXES, VideoLimits

MEDIA_TYPES = ("image/png", "image/jpeg", "image/jpg", "image/webp", "image/gif", "image/bmp", "image/tiff")


@dataclass(frozen=True)
class MediaPolicy:
    """What a server may read media from, and how much."""

    local_root: str | None = None  # file:// URLs are allowed inside this folder; None: refused
    allow_http: bool = False  # http(s) URLs are fetched (serve --allow-remote-media); False: refused
    timeout_s: float = 10.0  # per remote image or video, redirects included
    max_redirects: int = 3
    allowed_networks: tuple[str, ...] = ()  # for tests: CIDRs fetched from though not public (no flag sets it)
    limits: ImageLimits = ImageLimits()
    video_limits: VideoLimits = VideoLimits()


@dataclass(frozen=True)
class MediaKind:
    noun: str  # for messages: "image" / "video"
    max_bytes: int


def _scheme(url: str) -> str:
    return url.partition(":")[0].lower() if ":" in url else ""


async def url_bytes(url: str, where: str, policy: MediaPolicy, kind: MediaKind) -> bytes:
    scheme = _scheme(url)
    if scheme == "data":
        return _data_url(url, where, kind)
    if scheme == "file":
        return await asyncio.to_thread(_read_local, _local_path(url, where, policy, kind), where, kind)
    if scheme in ("http", "https"):
        if not policy.allow_http:
            raise ImageError(where, f"http(s) {kind.noun} URLs are not fetched by this server",
                             hint=f"start it with --allow-remote-media to fetch them, or send the {kind.noun} "
                                  f"as a data: URL")
        return await fetch_remote(url, where, policy, kind)
    raise ImageError(where, f"unsupported {kind.noun} URL scheme {scheme or url[:16]!r}",
                     hint=f"use a data: URL (data:{_example_type(kind)};base64,...), an http(s) URL or a file:// URL")


def _example_type(kind: MediaKind) -> str:
    return "video/mp4" if kind.noun == "video" else "image/png"


def _data_url(url: str, where: str, kind: MediaKind) -> bytes:
    header, comma, payload = url[len("data:"):].partition(",")
    example = f"data:{_example_type(kind)};base64,..."
    if not comma:
        raise ImageError(where, f"a data URL needs a comma before its data ({example})")
    parts = [p.strip().lower() for p in header.split(";")]
    if "base64" not in parts[1:]:
        raise ImageError(where, f"only base64 data URLs are supported ({example})")
    return base64_bytes(payload, where, kind, parts[0] or None)


def base64_bytes(text: str, where: str, kind: MediaKind, media_type: str | None) -> bytes:
    if media_type is not None:
        known = media_type.lower().startswith(MEDIA_PREFIXES) if kind.noun == "video" \
            else media_type.lower() in MEDIA_TYPES
        if not known:
            supported = "video/*" if kind.noun == "video" else ", ".join(MEDIA_TYPES)
            raise ImageError(where, f"media type {media_type!r} is not a supported {kind.noun} type ({supported})")
    if len(text) * 3 // 4 > kind.max_bytes + 3:
        raise ImageError(where, f"the {kind.noun} is more than the {kind.max_bytes} bytes allowed")
    try:
        return base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ImageError(where, f"the {kind.noun} data is not valid base64: {exc}") from None


def _local_path(url: str, where: str, policy: MediaPolicy, kind: MediaKind) -> Path:
    parsed = urlparse(url)
    if parsed.netloc not in ("", "localhost"):
        raise ImageError(where, f"file URLs name a local file; {parsed.netloc!r} is another host")
    if policy.local_root is None:
        raise ImageError(where, f"file:// {kind.noun} URLs are not allowed on this server",
                         hint=f"start it with --allowed-local-media-path DIR to serve {kind.noun}s from DIR")
    root = os.path.realpath(os.path.expanduser(policy.local_root))
    path = os.path.realpath(unquote(parsed.path))
    if os.path.commonpath([root, path]) != root:
        raise ImageError(where, f"the file is outside the folder this server reads {kind.noun}s from")
    return Path(path)


def _read_local(path: Path, where: str, kind: MediaKind) -> bytes:
    return read_limited(path, where, kind.max_bytes, kind.noun)
