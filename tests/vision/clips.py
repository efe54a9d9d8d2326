"""Small real videos for the tests, encoded with PyAV (FFmpeg): frame ``i`` is a flat colour
whose red channel is ``6 * i`` (so a decoded frame tells which one it was: ``frame_index``)
and whose green channel is ``tint`` (so tests can make videos with different content)."""

from __future__ import annotations

import io

STEP = 6


def clip_bytes(frames: int = 40, rate: int = 10, tint: int = 100, size: tuple[int, int] = (64, 48),
               codec: str = "mpeg4", fmt: str = "mp4") -> bytes:
    """``frames`` frames at ``rate`` per second (40 at 10: a 4 s clip)."""
    import av
    import numpy as np

    buf = io.BytesIO()
    with av.open(buf, "w", format=fmt) as container:
        stream = container.add_stream(codec, rate=rate)
        stream.width, stream.height = size
        stream.pix_fmt = "yuv420p"
        stream.bit_rate = 4_000_000  # flat colours come back within a step of STEP
        for i in range(frames):
            arr = np.zeros((size[1], size[0], 3), np.uint8)
            arr[..., 0], arr[..., 1] = STEP * i, tint
            for packet in stream.encode(av.VideoFrame.from_ndarray(arr, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return buf.getvalue()


def audio_only_bytes() -> bytes:
    """A WAV file: a container FFmpeg opens that has no video stream."""
    import av
    import numpy as np

    buf = io.BytesIO()
    with av.open(buf, "w", format="wav") as container:
        stream = container.add_stream("pcm_s16le", rate=8000, layout="mono")
        frame = av.AudioFrame.from_ndarray(np.zeros((1, 800), np.int16), format="s16", layout="mono")
        frame.sample_rate = 8000
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return buf.getvalue()


def frame_index(image) -> int:
    """Which frame of ``clip_bytes`` a decoded RGB image is."""
    return round(image.getpixel((image.size[0] // 2, image.size[1] // 2))[0] / STEP)


def resized_midway_bytes(small: tuple[int, int] = (64, 48), big: tuple[int, int] = (640, 480)) -> bytes:
    """An MPEG-TS H.264 stream of 2 s at 10 fps whose second half is ``big``: the header (and
    the codec context) say ``small``, the later frames are larger, as a stream may change."""
    from fractions import Fraction

    import av
    import numpy as np

    buf = io.BytesIO()
    with av.open(buf, "w", format="mpegts") as container:
        stream = container.add_stream("libx264", rate=10)
        stream.width, stream.height = small
        stream.pix_fmt = "yuv420p"
        later = av.CodecContext.create("libx264", "w")
        later.width, later.height = big
        later.pix_fmt, later.time_base, later.framerate = "yuv420p", Fraction(1, 10), 10
        for first, (encoder, (width, height)) in ((0, (stream, small)), (10, (later, big))):
            for i in range(first, first + 10):
                frame = av.VideoFrame.from_ndarray(np.zeros((height, width, 3), np.uint8), format="rgb24")
                frame = frame.reformat(format="yuv420p")
                frame.pts, frame.time_base = i, Fraction(1, 10)
                for packet in encoder.encode(frame):
                    packet.stream = stream
                    container.mux(packet)
            for packet in encoder.encode(None):
                packet.stream = stream
                container.mux(packet)
    return buf.getvalue()
