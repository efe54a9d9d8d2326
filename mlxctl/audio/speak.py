"""Speak text with Kokoro loaded through mlx-audio, one chunk (about a sentence) at a time.

The model is mlx-audio's Kokoro (``mlx_audio.tts.models.kokoro``): its class, weight
sanitising and forward pass. Text becomes phonemes with espeak-ng (:mod:`phonemes`), cut into
chunks of whole sentences; each chunk is synthesised on its own with the voice pack's style
vector for its length, so audio can be written out while the next chunk is computed.

On the CPU mlx-audio's decoder is dominated by dilated and transposed 1-D convolutions, which
MLX's CPU backend runs at a few GFLOP/s; they are computed here as sums of matrix products
instead (the same numbers, many times faster with a fast BLAS). All MLX work happens on the
calling thread.

Audio comes out as float32 samples at 24 kHz, mono; :func:`pcm16` and :func:`wav_header` turn
them into the bytes of ``pcm`` (signed 16-bit little-endian) and ``wav`` output (mp3, opus, aac
and flac are :mod:`mlxctl.audio.encode`'s). A WAV header
written before the length is known carries 0xFFFFFFFF sizes, as streamed WAV does;
:func:`fix_wav_sizes` puts the real sizes into a file once it is complete.
"""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from mlxctl.audio.encode import ENCODED
from mlxctl.audio.phonemes import Chunk, phonemize
from mlxctl.errors import BadInputError, ModelFormatError

SAMPLE_RATE = 24000
FORMATS = ("wav", "pcm", *ENCODED)  # the last four encoded by :mod:`encode`
DEFAULT_VOICE = "jf_alpha"  # the catalog model's first voice; other models: their first voice
MIN_SPEED, MAX_SPEED = 0.25, 4.0
UNKNOWN_SIZE = 0xFFFFFFFF
LANGUAGES = {"a": "en-us", "b": "en-gb", "e": "es", "f": "fr", "h": "hi", "i": "it", "j": "ja", "p": "pt-br",
             "z": "zh"}  # Kokoro voice names start with a language letter and f or m


# --- voices ---------------------------------------------------------------------------------


def voice_files(folder: Path) -> dict[str, Path]:
    """The voice packs of an mlx-audio Kokoro folder (``voices/<name>.safetensors``) by name."""
    return {p.stem: p for p in sorted((Path(folder) / "voices").glob("*.safetensors"))}


def default_voice(names: list[str]) -> str:
    return DEFAULT_VOICE if DEFAULT_VOICE in names else min(names)


def check_voice(name: str | None, names: list[str], model: str = "the model") -> str:
    """``name`` if the model has that voice (None: its default); otherwise bad input listing them."""
    if not names:
        raise ModelFormatError(f"{model} has no voices (voices/*.safetensors)")
    if name is None or not name.strip():
        return default_voice(names)
    if name.strip() not in names:
        raise BadInputError(f"unknown voice {name!r}: {model} has {', '.join(sorted(names))}",
                            hint=f"pick one with --voice (default: {default_voice(names)})")
    return name.strip()


def voice_info(name: str) -> dict[str, str | None]:
    """What a Kokoro voice name says: ``jf_alpha`` is a Japanese female voice called alpha."""
    prefix, _, _ = name.partition("_")
    gender = {"f": "female", "m": "male"}.get(prefix[1:2]) if len(prefix) == 2 else None
    return {"id": name, "name": name, "language": LANGUAGES.get(prefix[:1]) if gender else None, "gender": gender}


def check_speed(speed: float) -> float:
    try:
        value = float(speed)
    except (TypeError, ValueError):
        raise BadInputError(f"speed must be a number, got {speed!r}") from None
    if not MIN_SPEED <= value <= MAX_SPEED:
        raise BadInputError(f"speed must be between {MIN_SPEED} and {MAX_SPEED}, got {value:g}")
    return value


def check_format(fmt: str) -> str:
    value = (fmt or "").strip().lower()
    if value not in FORMATS:
        raise BadInputError(f"unknown audio format {fmt!r}: use {', '.join(FORMATS)}")
    return value


# --- the model ------------------------------------------------------------------------------


@dataclass
class KokoroModel:
    """A loaded Kokoro model, its vocabulary and voices, and the name it is known by."""

    name: str
    path: Path
    model: Any  # mlx_audio.tts.models.kokoro.Model
    vocab: dict[str, int]
    voices: dict[str, Path]
    _packs: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def sample_rate(self) -> int:
        return int(self.model.sample_rate)

    @property
    def voice_names(self) -> list[str]:
        return sorted(self.voices)

    @property
    def default_voice(self) -> str:
        return default_voice(self.voice_names)

    def check_voice(self, name: str | None) -> str:
        return check_voice(name, self.voice_names, self.name)

    def pack(self, voice: str) -> Any:
        """The voice's style vectors, (rows, 1, 256), loaded once."""
        import mlx.core as mx

        if voice not in self._packs:
            try:
                pack = mx.load(str(self.voices[voice]))["voice"]
            except (OSError, ValueError, KeyError) as exc:
                raise ModelFormatError(f"cannot read the voice {voice} in {self.path}: {exc}") from None
            if pack.ndim == 2:
                pack = pack[:, None, :]
            self._packs[voice] = pack
        return self._packs[voice]

    def speak(self, text: str, *, voice: str | None = None, speed: float = 1.0) -> Speech:
        """Check the request and turn ``text`` into phonemes; iterate the result for audio."""
        name = self.check_voice(voice)
        return Speech(self, phonemize(text, self.vocab), name, check_speed(speed))

    def synthesize(self, phonemes: str, voice: str, speed: float = 1.0) -> np.ndarray:
        """One chunk's phonemes (at most 510) as float32 samples."""
        import mlx.core as mx

        pack = self.pack(voice)
        index = min(max(len(phonemes), 1), pack.shape[0]) - 1
        audio = self.model(phonemes, pack[index], speed)
        samples = np.array(audio, dtype=np.float32).reshape(-1)
        mx.clear_cache()
        return samples


@dataclass
class Speech:
    """Text being spoken: iterate it for float32 sample arrays, one per chunk."""

    kokoro: KokoroModel
    chunks: list[Chunk]
    voice: str
    speed: float
    samples: int = 0

    @property
    def sample_rate(self) -> int:
        return self.kokoro.sample_rate

    @property
    def duration(self) -> float:
        """Seconds of audio produced so far."""
        return self.samples / self.sample_rate

    @property
    def phonemes(self) -> int:
        return sum(len(c.phonemes) for c in self.chunks)

    def __iter__(self) -> Iterator[np.ndarray]:
        for chunk in self.chunks:
            audio = self.kokoro.synthesize(chunk.phonemes, self.voice, self.speed)
            self.samples += audio.size
            yield audio


def load_kokoro(path: Path, name: str | None = None) -> KokoroModel:
    """Load the mlx-audio Kokoro folder at ``path`` (float32 weights, checked with strict=True)."""
    import mlx.core as mx
    from mlx_audio.tts.models.kokoro import Model, ModelConfig

    path = Path(path)
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
        model_config = ModelConfig.from_dict(config)
    except (OSError, ValueError, TypeError) as exc:
        raise ModelFormatError(f"{path} is not a Kokoro model folder: {exc}") from None
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise ModelFormatError(f"{path} has no *.safetensors weights")
    voices = voice_files(path)
    if not voices:
        raise ModelFormatError(f"{path} has no voices (voices/*.safetensors)")
    model = Model(model_config)
    weights: dict[str, Any] = {}
    for file in files:
        weights.update(mx.load(str(file)))
    try:
        model.load_weights(list(model.sanitize(weights).items()), strict=True)
    except ValueError as exc:
        raise ModelFormatError(f"the weights in {path} do not fit mlx-audio's Kokoro: {exc}") from None
    mx.eval(model.parameters())
    model.eval()
    _use_fast_convolutions(model)
    return KokoroModel(name or path.name, path, model, dict(model_config.vocab), voices)


# --- faster 1-D convolutions on the CPU -----------------------------------------------------


def conv1d(x: Any, weight: Any, stride: int = 1, padding: int = 0, dilation: int = 1, groups: int = 1) -> Any:
    """``mx.conv1d`` (x: N, L, C_in; weight: C_out, K, C_in) as a sum of K matrix products."""
    import mlx.core as mx

    if groups != 1:
        return mx.conv1d(x, weight, stride=stride, padding=padding, dilation=dilation, groups=groups)
    kernel = weight.shape[1]
    if padding:
        x = mx.pad(x, ((0, 0), (padding, padding), (0, 0)))
    length = (x.shape[1] - dilation * (kernel - 1) - 1) // stride + 1
    if length <= 0:
        return mx.conv1d(x, weight, stride=stride, dilation=dilation)
    out = None
    for k in range(kernel):
        start = k * dilation
        term = x[:, start : start + stride * (length - 1) + 1 : stride, :] @ weight[:, k, :].T
        out = term if out is None else out + term
    return out


def conv_transpose1d(x: Any, weight: Any, stride: int = 1, padding: int = 0, dilation: int = 1,
                     groups: int = 1) -> Any:
    """``mx.conv_transpose1d`` (weight: C_out, K, C_in) as one matrix product and an overlap-add."""
    import mlx.core as mx

    if groups != 1 or dilation != 1:
        return mx.conv_transpose1d(x, weight, stride=stride, padding=padding, dilation=dilation, groups=groups)
    c_out, kernel, c_in = weight.shape
    n, length, _ = x.shape
    y = (x @ weight.reshape(c_out * kernel, c_in).T).reshape(n, length, c_out, kernel).transpose(0, 1, 3, 2)
    blocks = -(-kernel // stride)
    if blocks * stride != kernel:
        y = mx.pad(y, ((0, 0), (0, 0), (0, blocks * stride - kernel), (0, 0)))
    full = (length - 1) * stride + blocks * stride
    out = None
    for b in range(blocks):  # taps b*stride ... b*stride+stride-1 of every input step tile the output
        part = y[:, :, b * stride : (b + 1) * stride, :].reshape(n, length * stride, c_out)
        part = mx.pad(part, ((0, 0), (b * stride, full - length * stride - b * stride), (0, 0)))
        out = part if out is None else out + part
    size = (length - 1) * stride - 2 * padding + kernel
    return out[:, padding : padding + size, :]


def _use_fast_convolutions(model: Any) -> None:
    """Make every weight-normalised convolution of the model use :func:`conv1d` and
    :func:`conv_transpose1d`."""
    import mlx.core as mx
    from mlx_audio.tts.models.kokoro.istftnet import ConvWeighted

    fast = {mx.conv1d: conv1d, mx.conv_transpose1d: conv_transpose1d}

    class FastConvWeighted(ConvWeighted):
        def __call__(self, x: Any, conv: Any) -> Any:
            return super().__call__(x, fast.get(conv, conv))

    for _name, module in model.named_modules():
        if type(module) is ConvWeighted:
            module.__class__ = FastConvWeighted


# --- bytes out ------------------------------------------------------------------------------


def pcm16(samples: np.ndarray) -> bytes:
    """Samples in [-1, 1] as signed 16-bit little-endian PCM."""
    return (np.clip(np.asarray(samples, dtype=np.float32), -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()


def wav_header(sample_rate: int = SAMPLE_RATE, data_bytes: int | None = None) -> bytes:
    """A 44-byte PCM WAV header (mono, 16-bit); without ``data_bytes`` the sizes are 0xFFFFFFFF."""
    data = UNKNOWN_SIZE if data_bytes is None else data_bytes
    riff = UNKNOWN_SIZE if data_bytes is None else 36 + data_bytes
    return (b"RIFF" + struct.pack("<I", riff) + b"WAVE" + b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, sample_rate,
            sample_rate * 2, 2, 16) + b"data" + struct.pack("<I", data))


def fix_wav_sizes(f: BinaryIO) -> bool:
    """Write the real sizes into the header of a complete WAV file open for writing (if seekable)."""
    try:
        if not f.seekable():
            return False
        end = f.seek(0, 2)
        f.seek(4)
        f.write(struct.pack("<I", end - 8))
        f.seek(40)
        f.write(struct.pack("<I", end - 44))
        f.seek(end)
    except OSError:
        return False
    return True


# --- players --------------------------------------------------------------------------------

# players that read WAV from stdin as it arrives, then those that need a file
STREAM_PLAYERS = (("aplay", ["-q", "-"]), ("ffplay", ["-nodisp", "-autoexit", "-loglevel", "error", "-i", "-"]))
FILE_PLAYERS = (("afplay", []),)


@dataclass(frozen=True)
class Player:
    command: list[str]
    streams: bool  # reads WAV on stdin; else it is given a file name at the end


def find_player() -> Player | None:
    for name, args in STREAM_PLAYERS:
        if (found := shutil.which(name)) is not None:
            return Player([found, *args], streams=True)
    for name, args in FILE_PLAYERS:
        if (found := shutil.which(name)) is not None:
            return Player([found, *args], streams=False)
    return None


PLAYER_NAMES = ", ".join(name for name, _ in (*STREAM_PLAYERS, *FILE_PLAYERS))
