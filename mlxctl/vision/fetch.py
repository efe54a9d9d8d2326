"""Image references in requests -> :class:`ImageInput`.

A reference is a URL (``data:image/...;base64,...``, ``https://...``, ``file://...``) or, for
Anthropic, base64 text with its media type. Remote images are fetched with httpx under a byte
limit and a time limit (the whole fetch, redirects included); ``file://`` URLs are refused unless
the server names a folder they may come from (``serve --allowed-local-media-path``), and then only
files inside it (after symlinks are resolved) are read. Decoding runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from mlxctl.vision.images import ImageError, ImageInput, ImageLimits, decode_image, read_image_file

MEDIA_TYPES = ("image/png", "image/jpeg", "image/jpg", "image/webp", "image/gif", "image/bmp", "image/tiff")


@dataclass(frozen=True)
class MediaPolicy:
    """What a server may read images from, and how much."""

    local_root: str | None = None  # file:// URLs are allowed inside this folder; None: refused
    allow_http: bool = True
    timeout_s: float = 10.0  # per remote image, redirects included
    max_redirects: int = 3
    limits: ImageLimits = ImageLimits()


@dataclass(frozen=True)
class ImageRef:
    """An image as a request gives it: a URL, or base64 data (Anthropic's ``source``)."""

    where: str  # the field, for errors: messages.0.content.1.image_url.url
    url: str | None = None
    data: str | None = None  # base64 text
    media_type: str | None = None


async def load_image(ref: ImageRef, policy: MediaPolicy = MediaPolicy()) -> ImageInput:
    """Fetch (or read, or decode) ``ref``; an ImageError naming its field when anything is wrong."""
    if ref.url is None:
        data = _base64(ref.data or "", ref.where, policy.limits, ref.media_type)
    elif _scheme(ref.url) == "file":
        path = _local_path(ref.url, ref.where, policy)
        return await asyncio.to_thread(read_image_file, path, ref.where, policy.limits)
    else:
        data = await _url_bytes(ref.url, ref.where, policy)
    return await asyncio.to_thread(decode_image, data, ref.where, policy.limits)


def _scheme(url: str) -> str:
    return url.partition(":")[0].lower() if ":" in url else ""


async def _url_bytes(url: str, where: str, policy: MediaPolicy) -> bytes:
    scheme = _scheme(url)
    if scheme == "data":
        return _data_url(url, where, policy.limits)
    if scheme in ("http", "https"):
        if not policy.allow_http:
            raise ImageError(where, "http(s) image URLs are not allowed here")
        return await _fetch(url, where, policy)
    raise ImageError(where, f"unsupported image URL scheme {scheme or url[:16]!r}",
                     hint="use a data: URL (data:image/png;base64,...), an http(s) URL or a file:// URL")


def _data_url(url: str, where: str, limits: ImageLimits) -> bytes:
    header, comma, payload = url[len("data:"):].partition(",")
    if not comma:
        raise ImageError(where, "a data URL needs a comma before its data (data:image/png;base64,...)")
    parts = [p.strip().lower() for p in header.split(";")]
    if "base64" not in parts[1:]:
        raise ImageError(where, "only base64 data URLs are supported (data:image/png;base64,...)")
    return _base64(payload, where, limits, parts[0] or None)


def _base64(text: str, where: str, limits: ImageLimits, media_type: str | None) -> bytes:
    if media_type is not None and media_type.lower() not in MEDIA_TYPES:
        raise ImageError(where, f"media type {media_type!r} is not a supported image type ({', '.join(MEDIA_TYPES)})")
    if len(text) * 3 // 4 > limits.max_bytes + 3:
        raise ImageError(where, f"the image is more than the {limits.max_bytes} bytes allowed")
    try:
        return base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ImageError(where, f"the image data is not valid base64: {exc}") from None


def _local_path(url: str, where: str, policy: MediaPolicy) -> Path:
    parsed = urlparse(url)
    if parsed.netloc not in ("", "localhost"):
        raise ImageError(where, f"file URLs name a local file; {parsed.netloc!r} is another host")
    if policy.local_root is None:
        raise ImageError(where, "file:// image URLs are not allowed on this server",
                         hint="start it with --allowed-local-media-path DIR to serve images from DIR")
    root = os.path.realpath(os.path.expanduser(policy.local_root))
    path = os.path.realpath(unquote(parsed.path))
    if os.path.commonpath([root, path]) != root:
        raise ImageError(where, "the file is outside the folder this server reads images from")
    return Path(path)


async def _fetch(url: str, where: str, policy: MediaPolicy) -> bytes:
    import httpx

    limit = policy.limits.max_bytes
    try:
        async with asyncio.timeout(policy.timeout_s):
            async with httpx.AsyncClient(follow_redirects=True, max_redirects=policy.max_redirects,
                                         timeout=policy.timeout_s) as client:
                async with client.stream("GET", url, headers={"Accept": "image/*"}) as resp:
                    if resp.status_code != 200:
                        raise ImageError(where, f"fetching the image returned HTTP {resp.status_code}")
                    declared = resp.headers.get("content-length")
                    if declared and declared.isdigit() and int(declared) > limit:
                        raise ImageError(where, f"the image is {declared} bytes, more than the {limit} allowed")
                    chunks, size = [], 0
                    async for chunk in resp.aiter_bytes():
                        size += len(chunk)
                        if size > limit:
                            raise ImageError(where, f"the image is more than the {limit} bytes allowed")
                        chunks.append(chunk)
                    return b"".join(chunks)
    except TimeoutError:
        raise ImageError(where, f"fetching the image took longer than {policy.timeout_s:g} s") from None
    except httpx.HTTPError as exc:
        raise ImageError(where, f"could not fetch the image: {type(exc).__name__}: {exc}") from None
