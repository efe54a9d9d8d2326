"""Transcribe with a Whisper folder loaded through mlx-audio, one segment at a time.

The model is mlx-audio's Whisper (``mlx_audio.stt.models.whisper``): its class, weight loading,
tokenizer wrapper, log-Mel front end and single-window decoder (``Model.decode``). mlx-audio's
own ``generate()`` returns only once the whole file is done, so the loop over 30-second windows
lives here and yields each window's segments as soon as that window is decoded. It follows
Whisper's rules: the previous text conditions the next window, a window whose decode looks
wrong (too repetitive or too unlikely) is decoded again at a higher temperature, silent windows
are skipped, and the next window starts at the last timestamp the model emitted.

On the CPU the model runs in float32 (float16 there is several times slower), elsewhere in
float16. All MLX work happens on the calling thread.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mlxctl.errors import BadInputError, ModelFormatError

TEMPERATURES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)  # the fallback ladder when temperature is 0
COMPRESSION_LIMIT = 2.4  # gzip ratio above which a decode counts as a repetition loop
LOGPROB_FLOOR = -1.0  # mean log-probability below which a decode counts as a failure
NO_SPEECH = 0.6  # <|nospeech|> probability above which an unlikely window counts as silence
SAMPLE_RATE = 16000


@dataclass
class Segment:
    """A stretch of speech: times in seconds from the start, text as Whisper spaces it."""

    id: int
    seek: int  # mel frame the window it came from started at
    start: float
    end: float
    text: str
    tokens: list[int]
    temperature: float
    avg_logprob: float
    compression_ratio: float
    no_speech_prob: float
    words: list[dict] | None = None  # with word timestamps: word, start, end, probability


def language_code(language: str | None) -> str | None:
    """``en``, ``English`` or ``english`` → ``en``; an unknown language is bad input."""
    if language is None or not language.strip():
        return None
    from mlx_audio.stt.models.whisper.tokenizer import LANGUAGES, TO_LANGUAGE_CODE

    key = language.strip().lower()
    if key in LANGUAGES:
        return key
    if key in TO_LANGUAGE_CODE:
        return TO_LANGUAGE_CODE[key]
    raise BadInputError(f"unknown language {language!r}", hint="use an ISO 639-1 code such as en, de or ja")


def language_name(code: str) -> str:
    from mlx_audio.stt.models.whisper.tokenizer import LANGUAGES

    return LANGUAGES.get(code, code)


@dataclass
class WhisperModel:
    """A loaded Whisper model and the name it is known by."""

    name: str
    path: Path
    model: Any  # mlx_audio.stt.models.whisper.whisper.Model

    @property
    def multilingual(self) -> bool:
        return bool(self.model.is_multilingual)

    def check_language(self, language: str | None) -> str | None:
        """The language's code, if this model understands it (live input checks before audio comes)."""
        code = language_code(language)
        if code is not None and code != "en" and not self.multilingual:
            raise BadInputError(f"{self.name} understands English only, not {language_name(code).title()}",
                                hint="use a multilingual model such as whisper-base")
        return code

    def transcribe(self, audio: np.ndarray, *, language: str | None = None, prompt: str | None = None,
                   temperature: float = 0.0, word_timestamps: bool = False) -> Transcription:
        """Start transcribing ``audio`` (16 kHz mono float32); iterate the result for segments."""
        code = self.check_language(language)
        if not 0.0 <= temperature <= 1.0:
            raise BadInputError(f"temperature must be between 0 and 1, got {temperature}")
        temperatures = TEMPERATURES if temperature == 0.0 else (float(temperature),)
        return Transcription(self, np.asarray(audio, dtype=np.float32), code, prompt, temperatures, word_timestamps)


def compute_dtype() -> Any:
    import mlx.core as mx

    return mx.float32 if mx.default_device() == mx.cpu else mx.float16


def load_whisper(path: Path, name: str | None = None) -> WhisperModel:
    """Load the mlx-audio Whisper folder at ``path`` (weights in float32 on the CPU)."""
    import mlx.core as mx
    from mlx import nn
    from mlx_audio.stt.models.whisper.whisper import Model, ModelDimensions

    path = Path(path)
    try:
        config = json.loads((path / "config.json").read_text())
        dims = ModelDimensions.from_dict(config)
    except (OSError, ValueError, TypeError) as exc:
        raise ModelFormatError(f"{path} is not a Whisper model folder: {exc}") from None
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise ModelFormatError(f"{path} has no *.safetensors weights")
    model = Model(dims, dtype=compute_dtype())
    weights: dict[str, Any] = {}
    for file in files:
        weights.update(mx.load(str(file)))
    weights = model.sanitize(weights)
    if quantization := config.get("quantization"):
        nn.quantize(model, **quantization,
                    class_predicate=lambda p, m: isinstance(m, (nn.Linear, nn.Embedding)) and f"{p}.scales" in weights)
    try:
        model.load_weights(list(weights.items()), strict=True)
    except ValueError as exc:
        raise ModelFormatError(f"the weights in {path} do not fit mlx-audio's Whisper: {exc}") from None
    mx.eval(model.parameters())
    model.eval()
    _quiet_transformers()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = Model.post_load_hook(model, path)
    if getattr(model, "_processor", None) is None:
        raise ModelFormatError(f"cannot load the tokenizer in {path}",
                               hint="it needs tokenizer.json, tokenizer_config.json and preprocessor_config.json")
    return WhisperModel(name or path.name, path, model)


def _quiet_transformers() -> None:
    """transformers says at import that PyTorch is missing: it is not needed for a tokenizer."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.set_verbosity_error()


@dataclass
class Transcription:
    """One file being transcribed: iterate it for segments as windows are decoded."""

    whisper: WhisperModel
    audio: np.ndarray
    language: str | None
    prompt: str | None
    temperatures: tuple[float, ...]
    word_timestamps: bool
    segments: list[Segment] = field(default_factory=list)

    def __post_init__(self) -> None:
        import mlx.core as mx
        from mlx_audio.stt.models.whisper.audio import (
            N_FRAMES,
            N_SAMPLES,
            log_mel_spectrogram,
        )

        if self.audio.ndim != 1 or self.audio.size == 0:
            raise BadInputError("the audio holds no samples")
        model = self.whisper.model
        self.mel = log_mel_spectrogram(mx.array(self.audio), n_mels=model.dims.n_mels, padding=N_SAMPLES)
        self.frames = self.mel.shape[0] - N_FRAMES
        self.duration = self.audio.size / SAMPLE_RATE
        self.language = model._detect_language(self.mel, self.language)
        self.tokenizer = model.get_tokenizer(language=self.language, task="transcribe")
        text = (self.prompt or "").strip()
        self.prompt_tokens = self.tokenizer.encode(" " + text) if text else []

    @property
    def text(self) -> str:
        return "".join(s.text for s in self.segments).strip()

    def __iter__(self) -> Iterator[Segment]:
        from mlx_audio.stt.models.whisper.audio import HOP_LENGTH, N_FRAMES, pad_or_trim

        model = self.whisper.model
        stride = N_FRAMES // model.dims.n_audio_ctx  # mel frames per output position (2)
        precision = stride * HOP_LENGTH / SAMPLE_RATE  # seconds per timestamp step (0.02)
        history, reset = list(self.prompt_tokens), 0
        seek = 0
        while seek < self.frames:
            size = min(N_FRAMES, self.frames - seek)
            offset = seek * HOP_LENGTH / SAMPLE_RATE
            window = pad_or_trim(self.mel[seek : seek + size], N_FRAMES, axis=-2).astype(model.dtype)
            result = self._decode(window, history[reset:])
            if result.no_speech_prob > NO_SPEECH and result.avg_logprob <= LOGPROB_FLOOR:
                seek += size  # silence
                continue
            pieces, advance = self._split(list(result.tokens), size, precision, stride)
            found = [self._segment(seek, offset + start, offset + end, tokens, result)
                     for start, end, tokens in pieces]
            if self.word_timestamps:
                self._add_words(found, window, size)
            seek += advance
            for segment in found:
                history.extend(segment.tokens)
            if result.temperature > 0.5:  # a hot decode is a poor prompt for the next window
                reset = len(history)
            for segment in found:
                if segment.text.strip() and segment.end > segment.start:
                    segment.id = len(self.segments)
                    self.segments.append(segment)
                    yield segment

    def _decode(self, window: Any, prompt: list[int]) -> Any:
        import mlx.core as mx
        from mlx_audio.stt.models.whisper.decoding import DecodingOptions

        result = None
        for temperature in self.temperatures:
            options = DecodingOptions(task="transcribe", language=self.language, temperature=temperature,
                                      prompt=prompt or None, fp16=self.whisper.model.dtype == mx.float16)
            result = self.whisper.model.decode(window, options)
            unlikely = result.avg_logprob < LOGPROB_FLOOR
            if result.no_speech_prob > NO_SPEECH and unlikely:
                break  # silence: no temperature will find words
            if result.compression_ratio <= COMPRESSION_LIMIT and not unlikely:
                break
        return result

    def _split(self, tokens: list[int], size: int, precision: float, stride: int
               ) -> tuple[list[tuple[float, float, list[int]]], int]:
        """Cut a window's tokens at pairs of timestamps; the pieces and how far to move on."""
        begin = self.tokenizer.timestamp_begin
        stamp = [t >= begin for t in tokens]
        ends_alone = len(tokens) >= 2 and stamp[-1] and not stamp[-2]
        cuts = [i for i in range(1, len(tokens)) if stamp[i - 1] and stamp[i]]
        if not cuts:
            stamps = [t for t in tokens if t >= begin]
            duration = size * precision / stride
            if stamps and stamps[-1] != begin:
                duration = (stamps[-1] - begin) * precision
            return [(0.0, duration, tokens)], size
        pieces, last = [], 0
        for cut in cuts + ([len(tokens)] if ends_alone else []):
            piece = tokens[last:cut]
            pieces.append(((piece[0] - begin) * precision, (piece[-1] - begin) * precision, piece))
            last = cut
        # the window ends mid-speech unless it ends on a lone timestamp: restart at the last one
        advance = size if ends_alone else (tokens[last - 1] - begin) * stride
        return pieces, advance if advance > 0 else size

    def _segment(self, seek: int, start: float, end: float, tokens: list[int], result: Any) -> Segment:
        text = self.tokenizer.decode([t for t in tokens if t < self.tokenizer.eot])
        return Segment(id=-1, seek=seek, start=float(start), end=float(end), text=text, tokens=tokens,
                       temperature=float(result.temperature), avg_logprob=float(result.avg_logprob),
                       compression_ratio=float(result.compression_ratio),
                       no_speech_prob=float(result.no_speech_prob))

    def _add_words(self, segments: list[Segment], window: Any, size: int) -> None:
        """Word timings from the alignment heads' cross-attention (mlx-audio's DTW)."""
        from mlx_audio.stt.models.whisper.timing import add_word_timestamps

        spoken = [s for s in segments if s.text.strip()]
        if not spoken:
            return
        dicts = [{"seek": s.seek, "start": s.start, "end": s.end, "text": s.text, "tokens": s.tokens}
                 for s in spoken]
        last_end = self.segments[-1].end if self.segments else 0.0
        add_word_timestamps(segments=dicts, model=self.whisper.model, tokenizer=self.tokenizer, mel=window,
                            num_frames=size, prepend_punctuations="\"'“¿([{-",
                            append_punctuations="\"'.。,，!！?？:：”)]}、", last_speech_timestamp=last_end)
        for segment, done in zip(spoken, dicts):
            segment.words = done.get("words", [])
            segment.start, segment.end = float(done["start"]), float(done["end"])
