"""Audio in: files or bytes to 16 kHz mono float32 samples, as Whisper takes them.

WAV, FLAC, MP3 and Ogg Vorbis are decoded in-process by miniaudio (resampled and mixed down
to mono there); anything else (M4A/AAC, Opus, WebM, ...) goes through ``ffmpeg`` when it is on
the PATH. Audio that neither can read is a :class:`BadInputError` (exit status 4, HTTP 400).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from mlxctl.errors import BadInputError

SAMPLE_RATE = 16000
NATIVE = "WAV, FLAC, MP3 or Ogg Vorbis"


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
        ffmpeg = shutil.which("ffmpeg")
        if ffmpeg is None:
            raise BadInputError(
                f"cannot decode {name}: it is not {NATIVE} audio",
                hint="install ffmpeg to read other formats such as M4A, Opus and WebM",
            )
        samples = _ffmpeg(ffmpeg, data, name)
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


def _ffmpeg(ffmpeg: str, data: bytes, name: str) -> np.ndarray:
    # a file, not a pipe: containers whose index is at the end (MP4) need to seek
    fd, tmp = tempfile.mkstemp(prefix="mlxctl-audio-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        done = subprocess.run(
            [ffmpeg, "-nostdin", "-hide_banner", "-loglevel", "error", "-i", tmp, "-map", "0:a:0", "-f", "f32le",
             "-ac", "1", "-ar", str(SAMPLE_RATE), "pipe:1"],
            capture_output=True, check=False,
        )
    finally:
        Path(tmp).unlink(missing_ok=True)
    if done.returncode != 0:
        reason = done.stderr.decode(errors="replace").strip().splitlines()
        raise BadInputError(f"cannot decode {name}: ffmpeg says: {reason[-1] if reason else 'unknown error'}")
    return np.frombuffer(done.stdout, dtype="<f4").astype(np.float32)
