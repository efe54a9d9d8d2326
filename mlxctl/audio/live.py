"""Live transcription: audio that is still arriving, cut into windows transcribed one by one.

Whisper hears at most 30 seconds at a time, so audio that arrives piece by piece is gathered
into windows of ``chunk_s`` seconds; each window is transcribed as soon as it is full, while
the rest is still arriving. A window is not cut at exactly ``chunk_s``: the cut goes at the
quietest 20 ms in its last seconds, so that a word is not split between two windows (which
would garble it in both). Each window is conditioned on the text before it, as Whisper
conditions its own 30-second windows, and whatever is left when the input ends is flushed as
a last window. The same pieces serve the CLI (``transcribe --live``, a blocking loop over
stdin) and the server (``/v1/audio/transcriptions/stream``, an async loop over the request).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mlxctl.audio.pcm_stream import PcmStream
from mlxctl.audio.transcribe import SAMPLE_RATE, Segment

CHUNK_S = (1.0, 10.0, 30.0)  # window length: least, default, most (Whisper's own window)
FRAME_S = 0.02  # the energy frame the quiet point is looked for in
SILENT = 1e-3  # a window whose loudest sample is under this (-60 dBFS) is not transcribed
PROMPT_CHARS = 500  # how much earlier text conditions the next window


@dataclass
class Window:
    """A stretch of the input, at its own sample rate, starting ``start`` seconds in."""

    start: float
    samples: np.ndarray
    rate: int

    @property
    def end(self) -> float:
        return self.start + self.samples.size / self.rate


def quiet_cut(samples: np.ndarray, rate: int, lo: int, hi: int) -> int:
    """Where to cut ``samples`` between ``lo`` and ``hi``: the middle of the quietest frame
    (the latest of equally quiet ones, so windows stay as long as asked)."""
    frame = max(1, int(rate * FRAME_S))
    count = (hi - lo) // frame
    if count < 2:
        return hi
    tail = samples[hi - count * frame : hi].astype(np.float64).reshape(count, frame)
    energy = (tail * tail).mean(axis=1)
    last = count - 1 - int(np.argmin(energy[::-1]))
    return hi - count * frame + last * frame + frame // 2


class Windower:
    """Samples in, full windows out: each cut at a quiet point in its last ``search_s``."""

    def __init__(self, rate: int, chunk_s: float = CHUNK_S[1], search_s: float | None = None):
        self.rate = rate
        self.size = max(1, int(chunk_s * rate))
        search = min(3.0, chunk_s / 3) if search_s is None else search_s
        self.search = min(self.size - 1, int(search * rate))
        self.start = 0  # samples already handed out in windows
        self._parts: list[np.ndarray] = []
        self._held = 0

    def push(self, samples: np.ndarray) -> list[Window]:
        if samples.size:
            self._parts.append(samples)
            self._held += samples.size
        out: list[Window] = []
        while self._held >= self.size:
            held = np.concatenate(self._parts)
            cut = quiet_cut(held, self.rate, self.size - self.search, self.size)
            out.append(self._take(held, cut))
        return out

    def flush(self) -> list[Window]:
        """What is left, as a last (shorter) window."""
        if not self._held:
            return []
        return [self._take(np.concatenate(self._parts), self._held)]

    def _take(self, held: np.ndarray, cut: int) -> Window:
        window = Window(self.start / self.rate, held[:cut], self.rate)
        rest = held[cut:]
        self._parts, self._held = ([rest] if rest.size else []), rest.size
        self.start += cut
        return window


class LiveInput:
    """Bytes as they arrive -> full windows: a :class:`PcmStream` and, once the rate is known,
    a :class:`Windower`."""

    def __init__(self, stream: PcmStream, chunk_s: float = CHUNK_S[1]):
        self.stream, self.chunk_s = stream, chunk_s
        self.windower: Windower | None = None

    @property
    def seconds(self) -> float:
        return self.stream.seconds

    def feed(self, data: bytes) -> list[Window]:
        samples = self.stream.feed(data)
        if self.windower is None and self.stream.rate:
            self.windower = Windower(self.stream.rate, self.chunk_s)
        return self.windower.push(samples) if self.windower else []

    def finish(self) -> list[Window]:
        self.stream.finish()
        return self.windower.flush() if self.windower else []


@dataclass
class LiveTranscript:
    """The text so far; :meth:`transcribe` adds one window's segments (on the model's thread)."""

    language: str | None = None
    prompt: str | None = None
    temperature: float = 0.0
    segments: list[Segment] = field(default_factory=list)
    duration: float = 0.0

    @property
    def text(self) -> str:
        return "".join(s.text for s in self.segments).strip()

    def transcribe(self, whisper: Any, window: Window) -> list[Segment]:
        """The window's segments, with times from the start of the input."""
        self.duration = max(self.duration, window.end)
        audio = to_whisper_rate(window.samples, window.rate)
        if audio.size < SAMPLE_RATE // 10 or float(np.abs(audio).max()) < SILENT:
            return []  # too short to hold a word, or digital silence: Whisper would invent one
        before = f"{self.prompt or ''} {self.text}".strip()[-PROMPT_CHARS:] or None
        run = whisper.transcribe(audio, language=self.language, prompt=before, temperature=self.temperature)
        found = []
        for segment in run:
            segment.id = len(self.segments)
            segment.start = round(window.start + segment.start, 3)
            segment.end = round(min(window.start + segment.end, window.end), 3)
            self.segments.append(segment)
            found.append(segment)
        self.language = run.language  # detected once, then kept: windows do not switch language
        return found


def to_whisper_rate(samples: np.ndarray, rate: int) -> np.ndarray:
    """``samples`` resampled to 16 kHz (miniaudio's low-passed linear resampler)."""
    samples = np.ascontiguousarray(samples, dtype=np.float32)
    if rate == SAMPLE_RATE or samples.size == 0:
        return samples
    import miniaudio

    f32 = miniaudio.SampleFormat.FLOAT32
    out = miniaudio.convert_frames(f32, 1, rate, samples.tobytes(), f32, 1, SAMPLE_RATE)
    return np.frombuffer(bytes(out), np.float32).copy()


class LiveRun:
    """Blocking live transcription for the CLI: iterate it for segments as windows fill.
    ``read()`` returns the next bytes (b"" at the end); it has the attributes of a
    ``Transcription`` (``segments``, ``text``, ``language``, ``duration``) for printing."""

    def __init__(self, whisper: Any, read: Callable[[], bytes], live: LiveInput, transcript: LiveTranscript):
        self.whisper, self.read, self.live, self.transcript = whisper, read, live, transcript

    segments = property(lambda self: self.transcript.segments)
    text = property(lambda self: self.transcript.text)
    language = property(lambda self: self.transcript.language or "")
    duration = property(lambda self: self.transcript.duration)

    def __iter__(self) -> Iterator[Segment]:
        while data := self.read():
            for window in self.live.feed(data):
                yield from self.transcript.transcribe(self.whisper, window)
        for window in self.live.finish():
            yield from self.transcript.transcribe(self.whisper, window)
