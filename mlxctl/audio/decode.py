"""Audio in: files or bytes to 16 kHz mono float32 samples, as Whisper takes them.

WAV, FLAC, MP3 and Ogg Vorbis are decoded by miniaudio first (small, fast, and what mlx-audio
uses); anything else (M4A/AAC, Ogg Opus, WebM, MP4 and MKV audio tracks: whatever FFmpeg reads)
is decoded by PyAV, FFmpeg's libraries bundled in-process, from a seekable buffer so containers
whose index is at the end (MP4) work, opened by ``mlxctl.media_safety`` (a concat script or
playlist is refused; FFmpeg may open no file or URL). Both mix channels down by averaging them,
then resample.
Audio that neither can read is a :class:`BadInputError` (exit status 4, HTTP 400) naming why.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mlxctl.errors import BadInputError
from mlxctl.media_safety import RefusedMedia, open_input

SAMPLE_RATE = 16000


def read_audio_file(path: Path) -> np.ndarray:
    """The samples of the audio file at ``path``; a missing or unreadable file is bad input."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise BadInputError(f"{path} is a folder, not an audio file")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise BadInputError(f"no such audio file: {path}") from None
    except OSError as exc:
        raise BadInputError(f"cannot read {path}: {exc.strerror or exc}") from None
    return decode_audio(data, name=str(path))


def decode_audio(data: bytes, *, name: str = "the audio") -> np.ndarray:
    """16 kHz mono float32 samples of the encoded audio ``data``."""
    if not data:
        raise BadInputError(f"{name} is empty")
    samples = _miniaudio(data)
    if samples is None:
        samples = _pyav(data, name)
    if samples.size == 0:
        raise BadInputError(f"{name} holds no audio samples")
    if not np.isfinite(samples).all():
        raise BadInputError(f"{name} holds samples that are not finite numbers")
    return samples


def _miniaudio(data: bytes) -> np.ndarray | None:
    import miniaudio

    try:
        decoded = miniaudio.decode(data, output_format=miniaudio.SampleFormat.FLOAT32, nchannels=1,
                                   sample_rate=SAMPLE_RATE)
    except miniaudio.DecodeError:
        return None
    return np.frombuffer(decoded.samples, dtype=np.float32).copy()


def _pyav(data: bytes, name: str) -> np.ndarray:
    """The first audio track of anything FFmpeg reads, channels averaged, at SAMPLE_RATE."""
    import av

    try:
        with open_input(data) as container:  # a playlist or concat script must not open files
            if not container.streams.audio:
                raise BadInputError(f"cannot decode {name}: it has no audio track "
                                    f"(FFmpeg reads it as {container.format.long_name or container.format.name})")
            stream = container.streams.audio[0]
            # planar float at the target rate, channels kept: averaged below as miniaudio does
            resampler = av.AudioResampler(format="fltp", rate=SAMPLE_RATE)
            parts = [_mono(f) for frame in container.decode(stream) for f in resampler.resample(frame)]
            parts += [_mono(f) for f in resampler.resample(None)]
    except av.FFmpegError as exc:
        raise BadInputError(f"cannot decode {name}: it is not audio FFmpeg can read ({_reason(exc)})",
                            hint="give WAV, FLAC, MP3, Ogg (Vorbis or Opus), M4A/AAC, WebM or another "
                                 "audio file") from None
    except RefusedMedia as exc:
        raise BadInputError(f"cannot decode {name}: {exc}") from None
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)


def _mono(frame: object) -> np.ndarray:
    planes = frame.to_ndarray()  # type: ignore[attr-defined]  # (channels, samples) float32
    return planes.mean(axis=0, dtype=np.float32) if planes.shape[0] > 1 else planes[0].astype(np.float32)


def _reason(exc: Exception) -> str:
    text = getattr(exc, "strerror", None) or str(exc)
    return text.split(": '<", 1)[0].strip() or type(exc).__name__
