"""Audio bytes that arrive in pieces (raw PCM, or a WAV stream) to mono float32 samples.

Live input cannot go through ``decode.py``: miniaudio and ffmpeg want the whole file. Raw
signed 16-bit little-endian PCM and streamed WAV (a header, then samples "until the end") are
what recorders write to a pipe (``arecord``, ``ffmpeg -f s16le``, ``sox``), and both can be
cut anywhere: a piece may end inside the header or inside a sample frame, so whatever does not
yet make a whole frame waits for the next piece. Samples keep their own rate; live.py resamples
each window to Whisper's 16 kHz once it is cut.
"""

from __future__ import annotations

import struct

import numpy as np

from mlxctl.errors import BadInputError

FORMATS = ("wav", "pcm")
RATES = (8000, 48000)  # the sample rates accepted, inclusive
MAX_CHANNELS = 8
MAX_HEADER = 1 << 16  # bytes of WAV header (fmt, LIST, ... chunks) before the data chunk
PCM, FLOAT, EXTENSIBLE = 1, 3, 0xFFFE
STREAMED = (0, 0xFFFFFFFF)  # data sizes that mean "until the end of the stream"


def check_layout(rate: int, channels: int, *, what: str = "the audio") -> None:
    """A sample rate and channel count Whisper's front end can use, else bad input."""
    if not RATES[0] <= rate <= RATES[1]:
        raise BadInputError(f"{what} has a sample rate of {rate} Hz: use {RATES[0]} to {RATES[1]} Hz")
    if not 1 <= channels <= MAX_CHANNELS:
        raise BadInputError(f"{what} has {channels} channels: use 1 to {MAX_CHANNELS}")


class PcmStream:
    """Feed it bytes as they come; it returns the whole frames so far, mixed down to mono."""

    def __init__(self, fmt: str = "wav", rate: int = 16000, channels: int = 1):
        if fmt not in FORMATS:
            raise BadInputError(f"unknown audio format {fmt!r}: use wav or pcm")
        self.wav = fmt == "wav"
        self.rate: int | None = None if self.wav else rate
        self.channels = channels
        self.dtype = np.dtype("<i2")
        self.remaining: int | None = None  # data bytes the WAV header announced (None: until the end)
        self.frames = 0  # sample frames decoded so far
        self._pending = b""
        if not self.wav:
            check_layout(rate, channels)

    @property
    def seconds(self) -> float:
        return self.frames / self.rate if self.rate else 0.0

    def feed(self, data: bytes) -> np.ndarray:
        """The mono float32 samples ``data`` completes (empty while the header is incomplete)."""
        buffer = self._pending + bytes(data)
        if self.rate is None:
            buffer = self._header(buffer)
            if self.rate is None:
                self._pending = buffer
                return np.zeros(0, np.float32)
        if self.remaining is not None:
            buffer = buffer[: self.remaining]
            self.remaining -= len(buffer)
        frame = self.dtype.itemsize * self.channels
        whole = len(buffer) - len(buffer) % frame
        self._pending = buffer[whole:]
        samples = np.frombuffer(buffer[:whole], self.dtype).reshape(-1, self.channels)
        self.frames += samples.shape[0]
        if self.dtype.kind == "i":
            mono = samples.astype(np.float32).mean(axis=1) / 32768.0
        else:
            mono = samples.astype(np.float32).mean(axis=1)
        if not np.isfinite(mono).all():
            raise BadInputError("the audio holds samples that are not finite numbers")
        return mono

    def finish(self) -> None:
        """At the end of the input: a stream that never got past its WAV header is bad input."""
        if self.rate is None:
            raise BadInputError("the audio ended before its WAV header was complete"
                                if self._pending else "no audio was received")

    def _header(self, buffer: bytes) -> bytes:
        """Parse as much of the WAV header as ``buffer`` holds; the bytes after it, or all of them."""
        if len(buffer) >= 12 and (buffer[:4] not in (b"RIFF", b"RF64") or buffer[8:12] != b"WAVE"):
            raise BadInputError("the audio is not a WAV stream (no RIFF/WAVE header)",
                                hint="send raw samples with format=pcm (or --raw-pcm)")
        at, fmt_seen = 12, False
        while len(buffer) >= at + 8:
            kind, size = buffer[at : at + 4], struct.unpack_from("<I", buffer, at + 4)[0]
            if kind == b"data":
                if not fmt_seen:
                    raise BadInputError("the WAV stream has no fmt chunk before its data")
                self.remaining = None if size in STREAMED else size
                self.rate = self._rate
                return buffer[at + 8 :]
            if len(buffer) < at + 8 + size:
                break
            if kind == b"fmt ":
                self._format(buffer[at + 8 : at + 8 + size])
                fmt_seen = True
            at += 8 + size + size % 2
        if len(buffer) > MAX_HEADER:
            raise BadInputError(f"the WAV header is over {MAX_HEADER} bytes without a data chunk")
        return buffer

    def _format(self, chunk: bytes) -> None:
        if len(chunk) < 16:
            raise BadInputError("the WAV stream's fmt chunk is too short")
        tag, channels, rate, _, _, bits = struct.unpack_from("<HHIIHH", chunk)
        if tag == EXTENSIBLE and len(chunk) >= 26:
            tag = struct.unpack_from("<H", chunk, 24)[0]  # the sub-format GUID starts with the tag
        if (tag, bits) == (PCM, 16):
            self.dtype = np.dtype("<i2")
        elif (tag, bits) == (FLOAT, 32):
            self.dtype = np.dtype("<f4")
        else:
            raise BadInputError(f"the WAV stream holds {bits}-bit samples of format {tag}: "
                                "send 16-bit PCM or 32-bit float")
        check_layout(rate, channels, what="the WAV stream")
        self._rate, self.channels = rate, channels
