"""Decoded videos by content + sampling, so a video sent again is not fetched into frames again.

The vision tower's feature cache (adapter.FeatureCache) already keeps each frame's features by
its key; this keeps the frames themselves, which decoding (the slow part for a long clip)
produces. Least recently used out first, within a byte budget of RGB pixels (decoding runs in
worker threads; ``ByteLRU`` takes a lock).
"""

from __future__ import annotations

from mlxctl.vision.lru import ByteLRU
from mlxctl.vision.video import VideoInput

DEFAULT_VIDEO_CACHE_BYTES = 256 * 1024 * 1024


class VideoCache(ByteLRU):
    def __init__(self, max_bytes: int = DEFAULT_VIDEO_CACHE_BYTES):
        super().__init__(max_bytes)

    def put(self, video: VideoInput) -> None:  # type: ignore[override]
        super().put(video.key, video)
