"""Video bytes -> the frames a model sees, each an :class:`ImageInput` for the image path.

Decoded with PyAV (FFmpeg, bundled in its wheel): the container's duration decides the sample
times (``sampling.sample_times``); the stream is decoded in order and each sample time takes
the frame on screen then, converted to RGB no larger than ``max_side`` on its longer side (the
conversion itself scales, so a huge frame never exists in RGB; every image processor we run
resizes further down). A decoded frame is released as soon as decoding moves past it, so at
most two full-size frames are held however many are sampled. Decoding stops once the last
sample time is settled. Client bytes are opened through ``mlxctl.media_safety``, so a concat
script or playlist cannot make FFmpeg read other files. Each frame is keyed by the video's
content hash and the frame's own time (engine/kv/media.py), so the feature cache and the prefix cache treat a repeated video, or the
same frame under other sampling, as already seen. In the prompt, each frame is one image
placeholder after a short label ("Frame at 1.5 s:"), so the model is told when it is shown.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlxctl.engine.kv.media import content_digest, frame_key, video_content_key
from mlxctl.media_safety import RefusedMedia, open_input
from mlxctl.vision.images import MAX_IMAGE_PIXELS, ImageError, ImageInput, read_limited
from mlxctl.vision.sampling import VideoSampling, pick_frames, sample_times

MAX_VIDEO_BYTES = 100 * 1024 * 1024
MAX_FRAME_SIDE = 1344  # px, the longer side of a sampled frame: above every processor's input (Gemma 3: 896)
EPS = 1e-6  # as sampling.pick_frames compares times
MEDIA_PREFIXES = ("video/", "application/octet-stream")


class VideoError(ImageError):
    """A bad video; ``param`` names the field (or flag) it came from."""


@dataclass(frozen=True)
class VideoLimits:
    max_bytes: int = MAX_VIDEO_BYTES
    max_pixels: int = MAX_IMAGE_PIXELS  # per decoded frame, before scaling
    max_side: int = MAX_FRAME_SIDE  # of each sampled frame's RGB image


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
        """The frames' pixel memory, for the decoded-video cache's budget: each distinct image
        once (a frame sampled for several times is one image), 4 bytes a pixel as Pillow keeps RGB."""
        distinct = {id(f.image): f.size for f in self.frames}
        return sum(w * h * 4 for w, h in distinct.values())


def frame_label(time_s: float) -> str:
    return f"Frame at {round(time_s, 2):g} s:"


def video_prompt(video: VideoInput, image_token: str) -> str:
    """The text a video part stands for in the prompt: one labelled placeholder per frame."""
    return "\n".join(f"{frame_label(t)} {image_token}" for t in video.times)


def decode_video(data: bytes, where: str, sampling: VideoSampling = VideoSampling(),
                 limits: VideoLimits = VideoLimits(), digest: str | None = None) -> VideoInput:
    """The sampled frames of ``data``; a VideoError naming ``where`` for anything wrong with it.
    ``digest``: ``content_digest(data)`` when the caller has it already."""
    if not data:
        raise VideoError(where, "the video is empty")
    if len(data) > limits.max_bytes:
        raise VideoError(where, f"the video is {len(data)} bytes, more than the {limits.max_bytes} allowed")
    import av

    digest = digest or content_digest(data)
    try:
        with open_input(data) as container:
            stream = _video_stream(container, where, limits)
            duration = _duration(container, stream)
            targets = sample_times(duration, sampling)
            picked = pick_frames(_frames(container, stream, targets, where, limits), targets)
            images = [(time, frame.image(limits.max_side)) for time, frame in picked]
    except VideoError:
        raise
    except RefusedMedia as exc:
        raise VideoError(where, str(exc)) from None
    except (av.FFmpegError, ValueError, OSError, IndexError, RuntimeError) as exc:
        raise VideoError(where, f"not a decodable video: {exc}") from None
    if not images:
        raise VideoError(where, "the video has no frames that could be decoded")
    frames = tuple(ImageInput(frame_key(digest, time), image, f"{where} (frame at {target:g} s)")
                   for target, (time, image) in zip(targets, images))
    return VideoInput(video_content_key(digest, sampling.fps, sampling.max_frames), frames, tuple(targets),
                      duration, where)


class _Frame:
    """A decoded frame while the samples are picked: its full-size pixels until decoding moves
    past it, then its scaled RGB image if it is on screen at a sample time, else nothing."""

    __slots__ = ("raw", "rgb")

    def __init__(self, raw: Any):
        self.raw, self.rgb = raw, None

    def image(self, max_side: int) -> Any:
        """The RGB image (PIL), made on first use from the full-size frame."""
        if self.rgb is None:
            if self.raw is None:
                raise RuntimeError("a sampled frame was released before it was converted")
            self.rgb = scaled_rgb(self.raw, max_side)
        self.raw = None
        return self.rgb

    def release(self) -> None:
        self.raw = None


def scaled_rgb(frame: Any, max_side: int) -> Any:
    """``frame`` as an RGB PIL image whose longer side is at most ``max_side``, aspect kept;
    scaled by FFmpeg in the conversion, so the full-size RGB image is never made."""
    width, height = frame.width, frame.height
    scale = min(1.0, max_side / max(width, height))
    if scale == 1.0:
        return frame.to_image()
    size = max(1, round(width * scale)), max(1, round(height * scale))
    return frame.to_image(width=size[0], height=size[1], interpolation="AREA")


def _video_stream(container: Any, where: str, limits: VideoLimits) -> Any:
    if not container.streams.video:
        raise VideoError(where, "the file has no video stream")
    stream = container.streams.video[0]
    width, height = stream.codec_context.width, stream.codec_context.height  # 0 when unknown
    if width * height > limits.max_pixels:
        raise VideoError(where, f"the video is {width}x{height} pixels, more than the {limits.max_pixels} allowed")
    stream.thread_type = "AUTO"
    return stream


def _frames(container: Any, stream: Any, targets: list[float], where: str,
            limits: VideoLimits) -> Iterator[tuple[float, _Frame]]:
    """(time, _Frame) for ``sampling.pick_frames``, each frame's own size checked. When the next
    frame shows which sample times a frame was on screen for (pick_frames' rule), that frame is
    converted if any, else released: pick_frames then holds small images, not full frames."""
    settled, prev = 0, None
    for time, raw in _timed_frames(container, stream):
        if not 0 < raw.width * raw.height <= limits.max_pixels:  # its own size: it may change mid-stream
            raise VideoError(where, f"the frame at {time:g} s is {raw.width}x{raw.height} pixels, not 1 to "
                                    f"the {limits.max_pixels} allowed")
        frame = _Frame(raw)
        shown = settled
        while settled < len(targets) and time > targets[settled] + EPS:
            settled += 1
        if settled > shown:  # those sample times show the previous frame (before the first: this one)
            (frame if prev is None else prev).image(limits.max_side)
        if prev is not None:
            prev.release()
        prev = frame
        yield time, frame


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
