"""Prefix-cache keys for what is not a token: images, video, and per-tenant salts.

The placeholder tokens a vision model puts in a prompt for an image are the same for every
image, so token ids alone would let one image's KV answer for another. A request that carries
media therefore salts its whole block chain with a key over the media it contains (in order):
the SHA-256 of each image's bytes, and for a video its path, size, modification time and the
sampling that decides which frames are seen (fps, max frames); a video sent as bytes is keyed
by their SHA-256 and the sampling, and each of its frames by that hash and the frame's own time
(so a frame picked again under other sampling is the same frame). Two requests share cached blocks
only when their tokens and their media are the same. The same salt mechanism isolates tenants
(a client-chosen ``cache_salt``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass


def image_key(data: bytes) -> str:
    """An image by content: equal bytes, equal key, wherever the image came from."""
    return "img:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class VideoRef:
    path: str
    fps: float
    max_frames: int


def video_key(video: VideoRef) -> str:
    """A video by file identity and frame sampling (decoding it to hash the frames would cost
    what the cache saves)."""
    st = os.stat(video.path)
    ident = f"{os.path.realpath(video.path)}|{st.st_size}|{st.st_mtime_ns}|{video.fps:g}|{video.max_frames}"
    return "vid:" + hashlib.sha256(ident.encode()).hexdigest()


def content_digest(data: bytes) -> str:
    """The SHA-256 of a video's bytes, which its keys below are made from."""
    return hashlib.sha256(data).hexdigest()


def video_content_key(video_digest: str, fps: float, max_frames: int) -> str:
    """A video by content (``content_digest`` of its bytes) and frame sampling: the key of its
    decoded frames."""
    return "vid:" + hashlib.sha256(f"{video_digest}|{fps:g}|{max_frames}".encode()).hexdigest()


def frame_key(video_digest: str, time_s: float) -> str:
    """One frame of a video (``content_digest`` of its bytes), by the time it starts at: what
    the vision tower's feature cache and the prefix cache key the frame's positions with."""
    return "vframe:" + hashlib.sha256(f"{video_digest}@{time_s:.6f}".encode()).hexdigest()


def cache_salt(media_keys: Iterable[str] = (), salt: str | None = None) -> str:
    """One string for the chain's fingerprint: empty when there is nothing to key on."""
    parts = [f"salt:{hashlib.sha256(salt.encode()).hexdigest()}"] if salt else []
    parts += list(media_keys)
    return "|".join(parts)
