"""Video bytes -> the frames a model sees, each an :class:`ImageInput` for the image path.

Decoded with PyAV (FFmpeg, bundled in its wheel): the container's duration decides the sample
times (``sampling.sample_times``); the stream is decoded in order and each sample time takes
the frame on screen then, converted to RGB. Decoding stops once the last sample time is
settled. Each frame is keyed by the video's content hash and the frame's own time
(engine/kv/media.py), so the feature cache and the prefix cache treat a repeated video, or the
same frame under other sampling, as already seen. In the prompt, each frame is one image
placeholder after a short label ("Frame at 1.5 s:"), so the model is told when it is shown.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlxctl.engine.kv.media import content_digest, frame_key, video_content_key
from mlxctl.vision.images import MAX_IMAGE_PIXELS, ImageError, ImageInput, read_limited
from mlxctl.vision.sampling import VideoSampling, pick_frames, sample_times

MAX_VIDEO_BYTES = 100 * 1024 * 1024
MEDIA_PREFIXES = ("video/", "application/octet-stream")


class VideoError(ImageError):
    """A bad video; ``param`` names the field (or flag) it came from."""


@dataclass(frozen=True)
class VideoLimits:
    max_bytes: int = MAX_VIDEO_BYTES
    max_pixels: int = MAX_IMAGE_PIXELS  # per frame


@dataclass(frozen=True, eq=False)
class VideoInput:
    """One video of a request: its key (content + sampling), the sampled frames in order with
    the times they were sampled at, and the clip's length in seconds."""

    key: str
    frames: tuple[ImageInput, ...]
    times: tuple[float, ...]
    duration: float
    where: str = "video"

    @property
    def nbytes(self) -> int:
        return sum(f.size[0] * f.size[1] * 3 for f in self.frames)


def frame_label(time_s: float) -> str:
    return f"Frame at {round(time_s, 2):g} s:"


def video_prompt(video: VideoInput, image_token: str) -> str:
    """The text a video part stands for in the prompt: one labelled placeholder per frame."""
    return "\n".join(f"{frame_label(t)} {image_token}" for t in video.times)


def decode_video(data: bytes, where: str, sampling: VideoSampling = VideoSampling(),
                 limits: VideoLimits = VideoLimits(), digest: str | None = None) -> VideoInput:
    """The sampled frames of ``data``; a VideoError naming ``where`` for anything wrong with it.
    ``digest``: ``content_digest(data)`` when the caller has it already."""
    import av

    if not data:
        raise VideoError(where, "the video is empty")
    if len(data) > limits.max_bytes:
        raise VideoError(where, f"the video is {len(data)} bytes, more than the {limits.max_bytes} allowed")
    digest = digest or content_digest(data)
    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            duration, picked = _sample(container, where, sampling, limits)
    except VideoError:
        raise
    except (av.FFmpegError, ValueError, OSError, IndexError, RuntimeError) as exc:
        raise VideoError(where, f"not a decodable video: {exc}") from None
    if not picked:
        raise VideoError(where, "the video has no frames that could be decoded")
    targets = sample_times(duration, sampling)
    return VideoInput(video_content_key(digest, sampling.fps, sampling.max_frames),
                      _frame_inputs(digest, where, targets, picked), tuple(targets), duration, where)


def _frame_inputs(digest: str, where: str, targets: list[float], picked: list) -> tuple[ImageInput, ...]:
    """RGB images of the picked frames; a frame picked for several times is converted once."""
    rgb: dict[float, Any] = {}
    out = []
    for target, (time, frame) in zip(targets, picked):
        if time not in rgb:
            rgb[time] = frame.to_image()
        out.append(ImageInput(frame_key(digest, time), rgb[time], f"{where} (frame at {target:g} s)"))
    return tuple(out)


def _sample(container: Any, where: str, sampling: VideoSampling, limits: VideoLimits) -> tuple[float, list]:
    if not container.streams.video:
        raise VideoError(where, "the file has no video stream")
    stream = container.streams.video[0]
    width, height = stream.codec_context.width, stream.codec_context.height
    if width * height > limits.max_pixels:
        raise VideoError(where, f"the video is {width}x{height} pixels, more than the {limits.max_pixels} allowed")
    stream.thread_type = "AUTO"
    duration = _duration(container, stream)
    return duration, pick_frames(_timed_frames(container, stream), sample_times(duration, sampling))


def _duration(container: Any, stream: Any) -> float:
    """Seconds, from the stream's header, else the container's; 0.0 when neither says."""
    if stream.duration and stream.time_base:
        return float(stream.duration * stream.time_base)
    if container.duration:
        return container.duration / 1_000_000  # AV_TIME_BASE
    return 0.0


def _timed_frames(container: Any, stream: Any):
    """(seconds since the stream's start, frame) for each decoded frame, in order."""
    start = float(stream.start_time * stream.time_base) if stream.start_time is not None and stream.time_base else 0.0
    rate = float(stream.average_rate or 25)
    for count, frame in enumerate(container.decode(stream)):
        yield (frame.time - start if frame.time is not None else count / rate), frame


def read_video_file(path: str | Path, where: str | None = None, sampling: VideoSampling = VideoSampling(),
                    limits: VideoLimits = VideoLimits()) -> VideoInput:
    """A video from a local file (``run --video``)."""
    path = Path(path).expanduser()
    where = where or str(path)
    data = read_limited(path, where, limits.max_bytes, "video", VideoError)
    return decode_video(data, where, sampling, limits)
