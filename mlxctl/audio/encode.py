"""Speech samples to compressed audio (mp3, opus, aac, flac) in-process with PyAV, chunk by chunk.

PyAV bundles FFmpeg's encoders, so no ``ffmpeg`` program is needed. An :class:`Encoder` takes
float32 samples a chunk (about a sentence) at a time and returns the container bytes that chunk
completed, so the audio can be sent or written while the next sentence is synthesised; what the
codec still holds (its look-ahead, a few tens of milliseconds) comes out of :meth:`Encoder.finish`.

The muxer writes to a sink that cannot seek, which is what makes streaming possible and costs
little: an MP3 has no Xing/LAME header (players then count frames for its length), a FLAC's
STREAMINFO says 0 ("unknown") total samples and no MD5. Opus is resampled to 48 kHz, the rate
Opus works at and every Opus decoder outputs, and put in Ogg pages of 100 ms (the muxer's 1 s
default would hold a short sentence back until the next one); AAC goes out as ADTS, whose
frames each carry a header and so can be cut and concatenated anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mlxctl.errors import BadInputError


@dataclass(frozen=True)
class Format:
    """One compressed format: its FFmpeg muxer and encoder, media type and output sample rate."""

    muxer: str
    codec: str
    media_type: str
    rate: int | None = None  # None: the input's rate
    options: tuple[tuple[str, str], ...] = ()


ENCODED: dict[str, Format] = {
    "mp3": Format("mp3", "libmp3lame", "audio/mpeg"),
    "opus": Format("ogg", "libopus", "audio/ogg", rate=48000, options=(("page_duration", "100000"),)),
    "aac": Format("adts", "aac", "audio/aac"),
    "flac": Format("flac", "flac", "audio/flac"),
}
SUFFIXES = {".mp3": "mp3", ".opus": "opus", ".ogg": "opus", ".aac": "aac", ".flac": "flac"}


class _Sink:
    """A write-only file for the muxer: it keeps what was written until it is taken."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: Any) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        data, self.parts = b"".join(self.parts), []
        return data


class Encoder:
    """Mono float32 samples in, one format's container bytes out, as each chunk arrives."""

    def __init__(self, fmt: str, sample_rate: int) -> None:
        import av

        if fmt not in ENCODED:
            raise BadInputError(f"unknown compressed audio format {fmt!r}: use {', '.join(ENCODED)}")
        spec = ENCODED[fmt]
        self.format, self.media_type, self.sample_rate = fmt, spec.media_type, sample_rate
        self._sink = _Sink()
        options = {"flush_packets": "1", **dict(spec.options)}
        self._container = av.open(self._sink, mode="w", format=spec.muxer, options=options)
        self._samples = 0
        self._closed = False
        rate = spec.rate or sample_rate
        try:  # a codec this FFmpeg lacks, or a rate it refuses: the container is released all the same
            self._stream = self._container.add_stream(spec.codec, rate=rate, layout="mono")
            self._resampler = av.AudioResampler(format=self._stream.codec_context.format, layout="mono", rate=rate)
        except BaseException:
            self.close()
            raise

    def encode(self, samples: np.ndarray) -> bytes:
        """Encode one chunk of samples in [-1, 1]; the bytes the container has for it so far."""
        import av

        data = np.clip(np.asarray(samples, dtype=np.float32).reshape(-1), -1.0, 1.0)
        if data.size == 0:
            return b""
        frame = av.AudioFrame.from_ndarray(data[None, :], format="flt", layout="mono")
        frame.sample_rate, frame.pts = self.sample_rate, self._samples
        self._samples += data.size
        self._mux(frame)
        return self._sink.take()

    def finish(self) -> bytes:
        """Flush the resampler, the encoder and the muxer: the last bytes of the file."""
        if not self._closed:
            self._closed = True
            try:
                self._mux(None)
                for packet in self._stream.encode(None):
                    self._container.mux(packet)
            finally:  # a flush that fails still releases the encoder and the muxer
                self._container.close()
        return self._sink.take()

    def close(self) -> None:
        """Release the encoder without finishing the file (a client gone, a failed synthesis)."""
        if not self._closed:
            self._closed = True
            self._container.close()

    def _mux(self, frame: Any) -> None:
        for resampled in self._resampler.resample(frame):
            for packet in self._stream.encode(resampled):
                self._container.mux(packet)


def encode_all(samples: np.ndarray, fmt: str, sample_rate: int) -> bytes:
    """A whole clip in one go (for tests and callers that have all the samples already)."""
    encoder = Encoder(fmt, sample_rate)
    return encoder.encode(samples) + encoder.finish()
