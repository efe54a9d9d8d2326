"""Which frames of a video a model sees: sampled uniformly in time at ``fps``, at most
``max_frames`` of them (then spread over the whole clip instead), as vLLM and mlx-vlm users
expect. Kept apart from decoding so the rule can be tested without a video.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

DEFAULT_FPS = 1.0
DEFAULT_MAX_FRAMES = 8
MAX_FPS = 30.0  # more frames per second than this is never what a prompt needs
MAX_FRAMES = 32  # hard cap per video: each frame costs a whole image's feature positions


@dataclass(frozen=True)
class VideoSampling:
    fps: float = DEFAULT_FPS
    max_frames: int = DEFAULT_MAX_FRAMES

    def check(self, prefix: str = "") -> VideoSampling:
        """Itself, or a ValueError naming the bad field (callers turn it into a 400)."""
        if not (isinstance(self.fps, (int, float)) and 0 < self.fps <= MAX_FPS and math.isfinite(self.fps)):
            raise ValueError(f"{prefix}fps must be more than 0 and at most {MAX_FPS:g}, got {self.fps!r}")
        if isinstance(self.max_frames, bool) or not isinstance(self.max_frames, int) \
                or not 1 <= self.max_frames <= MAX_FRAMES:
            raise ValueError(f"{prefix}max_frames must be an integer from 1 to {MAX_FRAMES}, got {self.max_frames!r}")
        return self


def sample_times(duration: float, sampling: VideoSampling) -> list[float]:
    """Seconds into the clip to show the model: ``0, 1/fps, 2/fps, ...`` while before the end;
    when that is more than ``max_frames``, ``max_frames`` times spread evenly over the clip
    (``k * duration / max_frames``). A clip of unknown or zero length gives its first frame."""
    if not duration > 0:
        return [0.0]
    count = max(1, math.ceil(duration * sampling.fps - 1e-9))
    if count <= sampling.max_frames:
        return [round(k / sampling.fps, 6) for k in range(count)]
    step = duration / sampling.max_frames
    return [round(k * step, 6) for k in range(sampling.max_frames)]


def pick_frames(frames: Iterable[tuple[float, T]], targets: list[float]) -> list[tuple[float, T]]:
    """For each target time, the (time, frame) on screen then: the last frame that starts at or
    before it (the first frame for targets before it). ``frames`` come in time order, as a decoder
    yields them; reading stops once every target is settled, so the rest is never decoded."""
    picks: list[tuple[float, T]] = []
    prev: tuple[float, T] | None = None
    for time, frame in frames:
        while len(picks) < len(targets) and time > targets[len(picks)] + 1e-6:
            picks.append(prev or (time, frame))
        if len(picks) == len(targets):
            return picks
        prev = (time, frame)
    return picks + [prev] * (len(targets) - len(picks)) if prev else []
