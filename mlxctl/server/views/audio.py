"""POST /v1/audio/transcriptions: OpenAI's speech-to-text endpoint, over mlx-audio Whisper.

The request is OpenAI's multipart form: ``file`` (the audio), ``model``, ``language``,
``prompt``, ``response_format`` (json, text, srt, verbose_json, vtt), ``temperature``,
``timestamp_granularities[]`` (segment, word; with verbose_json) and ``stream``. With
``stream=true`` the answer is server-sent events as OpenAI's newer models send them:
``transcript.text.delta`` for each segment as its 30-second window is decoded, then
``transcript.text.done`` with the whole text.

The model is the one ``serve --stt-model`` names (loaded when the app starts) or, without that
flag, the default speech-to-text model (``whisper-tiny-en``, converted and loaded on the first
request). Requests may name it, or OpenAI's model ids (``whisper-1``, ...), which mean it too.
It runs on one thread of its own with its own MLX stream, one transcription at a time: the chat
engine's thread is never used. Uploads are limited by the server's body limit
(``serve --max-body-mb``); over it the answer is a 413.

POST /v1/audio/speech is OpenAI's text-to-speech endpoint over mlx-audio Kokoro (JSON body:
``model``, ``input``, ``voice``, ``response_format``, ``speed``, ``stream_format``); GET
/v1/audio/voices lists the voices. That model is ``serve --tts-model`` (default ``kokoro-82m``,
converted and loaded on the first request) on a thread of its own; see the section below.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from aiohttp import BodyPartReader, web

from mlxctl.errors import MlxctlError
from mlxctl.server.errors import ApiError
from mlxctl.server.keys import SETTINGS

log = logging.getLogger("mlxctl.server")

STT = web.AppKey("stt", Any)  # SttService
TTS = web.AppKey("tts", Any)  # TtsService
FORMATS = ("json", "text", "srt", "verbose_json", "vtt")
GRANULARITIES = ("segment", "word")
OPENAI_IDS = ("whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe")  # clients hard-code these
FIELDS = {"file", "model", "language", "prompt", "response_format", "temperature", "timestamp_granularities[]",
          "timestamp_granularities", "stream"}
CHUNK = 1 << 16


class SttService:
    """The server's speech-to-text model on a thread of its own, loaded once."""

    def __init__(self, ref: str | None):
        from mlxctl.models.catalog import default_model

        self.ref = ref
        self.name = _served_name(ref) if ref else default_model("stt")
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mlxctl-stt")
        self._model: Any = None
        self._stream: Any = None

    def start(self) -> None:
        """Begin loading now (a failure is reported to the requests that need the model)."""
        self._executor.submit(self._quiet_load)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(model, *args)`` on the model's thread, the model loaded first."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, partial(self._job, fn, *args))

    def _job(self, fn: Callable[..., Any], *args: Any) -> Any:
        import mlx.core as mx

        if self._stream is None:
            self._stream = mx.new_stream(mx.default_device())
        with mx.stream(self._stream):
            return fn(self._load(), *args)

    def _load(self) -> Any:
        if self._model is None:
            from mlxctl.audio.models import resolve_stt
            from mlxctl.audio.transcribe import load_whisper

            try:
                folder = resolve_stt(self.ref, progress=lambda m: log.info("stt: %s", m))
                self._model = load_whisper(folder.path, self.name)
            except MlxctlError as err:
                raise ApiError(503, f"the speech-to-text model {self.name} could not be loaded: {err.message}",
                               code="model_not_loaded") from err
            log.info("stt: %s loaded from %s", self.name, folder.path)
        return self._model

    def _quiet_load(self) -> None:
        import mlx.core as mx

        try:
            self._stream = mx.new_stream(mx.default_device())
            with mx.stream(self._stream):
                self._load()
        except Exception as exc:  # noqa: BLE001 (the requests report it)
            log.warning("stt: %s", getattr(exc, "message", exc))


def _served_name(ref: str) -> str:
    path = Path(ref).expanduser()
    return path.resolve().name if path.exists() else ref.strip()


def setup(app: web.Application) -> None:
    """The route, and the model's thread (loading at start when serve --stt-model names one)."""
    app[STT] = SttService(app[SETTINGS].stt_model)
    app[TTS] = TtsService(app[SETTINGS].tts_model)
    app.router.add_post("/v1/audio/transcriptions", transcriptions)
    app.router.add_post("/v1/audio/speech", speech)
    app.router.add_get("/v1/audio/voices", voices)
    app.on_startup.append(_start)
    app.on_cleanup.append(_stop)


async def _start(app: web.Application) -> None:
    if app[SETTINGS].stt_model:
        app[STT].start()
    if app[SETTINGS].tts_model:
        app[TTS].start()


async def _stop(app: web.Application) -> None:
    app[STT].close()
    app[TTS].close()


# --- the request ----------------------------------------------------------------------------


@dataclass
class TranscriptionForm:
    audio: bytes
    filename: str
    model: str | None = None
    language: str | None = None
    prompt: str | None = None
    response_format: str = "json"
    temperature: float = 0.0
    granularities: tuple[str, ...] = ("segment",)
    stream: bool = False
    extra: dict[str, str] = field(default_factory=dict)


async def read_form(request: web.Request, limit: int) -> TranscriptionForm:
    """The multipart form, at most ``limit`` bytes in all (413 beyond), checked field by field."""
    if request.content_type != "multipart/form-data":
        raise ApiError(400, "send the audio as multipart/form-data with a 'file' field (and 'model', ...)")
    try:
        reader = await request.multipart()
    except (ValueError, AssertionError) as exc:
        raise ApiError(400, f"malformed multipart body: {exc}") from exc
    values: dict[str, list[str]] = {}
    audio, filename, used = None, "", 0
    while True:
        try:
            part = await reader.next()
        except ValueError as exc:
            raise ApiError(400, f"malformed multipart body: {exc}") from exc
        if part is None:
            break
        if not isinstance(part, BodyPartReader):
            raise ApiError(400, "nested multipart parts are not accepted")
        name = part.name or ""
        data = bytearray()
        while chunk := await part.read_chunk(CHUNK):
            used += len(chunk)
            if used > limit:
                raise ApiError(413, f"request body too large: over {limit} bytes (the server's limit, "
                                    "serve --max-body-mb)")
            data.extend(chunk)
        if name == "file":
            if audio is not None:
                raise ApiError(400, "give one 'file'", param="file")
            audio, filename = bytes(data), part.filename or "the file"
        elif name not in FIELDS:
            raise ApiError(400, f"unsupported field '{name}': mlxctl does not implement it", param=name)
        else:
            try:
                values.setdefault(name, []).append(bytes(data).decode("utf-8"))
            except UnicodeDecodeError:
                raise ApiError(400, f"invalid field '{name}': not UTF-8 text", param=name) from None
    if audio is None:
        raise ApiError(400, "missing the 'file' field (the audio to transcribe)", param="file")
    return _check(audio, filename, values)


def _one(values: dict[str, list[str]], name: str) -> str | None:
    got = values.get(name)
    if not got:
        return None
    if len(got) > 1:
        raise ApiError(400, f"invalid field '{name}': given {len(got)} times", param=name)
    return got[0].strip()


def _check(audio: bytes, filename: str, values: dict[str, list[str]]) -> TranscriptionForm:
    from mlxctl.audio.transcribe import language_code

    form = TranscriptionForm(audio=audio, filename=filename, model=_one(values, "model") or None,
                             prompt=_one(values, "prompt") or None)
    fmt = _one(values, "response_format") or "json"
    if fmt not in FORMATS:
        raise ApiError(400, f"invalid field 'response_format': {fmt!r} is not one of {', '.join(FORMATS)}",
                       param="response_format")
    form.response_format = fmt
    try:
        form.language = language_code(_one(values, "language"))
    except MlxctlError as err:
        raise ApiError(400, f"invalid field 'language': {err.message}", param="language") from err
    if (raw := _one(values, "temperature")) is not None:
        try:
            form.temperature = float(raw)
        except ValueError:
            raise ApiError(400, f"invalid field 'temperature': {raw!r} is not a number", param="temperature") from None
        if not 0.0 <= form.temperature <= 1.0:
            raise ApiError(400, "invalid field 'temperature': must be between 0 and 1", param="temperature")
    grains = [*values.get("timestamp_granularities[]", []), *values.get("timestamp_granularities", [])]
    if grains:
        bad = [g for g in grains if g not in GRANULARITIES]
        if bad:
            raise ApiError(400, f"invalid field 'timestamp_granularities[]': {bad[0]!r} is not segment or word",
                           param="timestamp_granularities[]")
        if fmt != "verbose_json":
            raise ApiError(400, "timestamp_granularities[] needs response_format verbose_json",
                           param="timestamp_granularities[]")
        form.granularities = tuple(dict.fromkeys(grains))
    stream = (_one(values, "stream") or "false").lower()
    if stream not in ("true", "false", "1", "0"):
        raise ApiError(400, f"invalid field 'stream': {stream!r} is not true or false", param="stream")
    form.stream = stream in ("true", "1")
    if form.stream and fmt not in ("json", "text"):
        raise ApiError(400, f"stream=true sends text events: response_format {fmt} cannot be streamed",
                       param="stream")
    return form


def check_model(service: SttService, name: str | None) -> None:
    if name is not None and name not in (service.name, *OPENAI_IDS):
        raise ApiError(404, f"model '{name}' not found: this server transcribes with '{service.name}' "
                            f"(or say {', '.join(OPENAI_IDS)})", param="model", code="model_not_found")


# --- the handler ----------------------------------------------------------------------------


async def transcriptions(request: web.Request) -> web.StreamResponse:
    from mlxctl.audio.decode import decode_audio

    service: SttService = request.app[STT]
    form = await read_form(request, request.app[SETTINGS].max_body_bytes)
    check_model(service, form.model)
    try:
        samples = await asyncio.to_thread(decode_audio, form.audio, name=form.filename)
    except MlxctlError as err:
        raise ApiError(400, err.message + (f" ({err.hint})" if err.hint else ""), param="file") from err
    form.audio = b""
    options = {"language": form.language, "prompt": form.prompt, "temperature": form.temperature,
               "word_timestamps": "word" in form.granularities and form.response_format == "verbose_json"}
    try:
        run = await service.call(lambda model: model.transcribe(samples, **options))
    except MlxctlError as err:
        raise ApiError(400, err.message) from err
    if form.stream:
        return await _stream(request, service, run)
    cancel = threading.Event()
    limit = request.app[SETTINGS].request_timeout_s
    try:
        async with asyncio.timeout(limit):
            await service.call(_finish, run, cancel)
    except TimeoutError:
        raise ApiError(504, f"the transcription took longer than the server's limit of {limit:g} s "
                            "(serve --request-timeout)", code="timeout") from None
    finally:
        cancel.set()  # a client gone mid-file (or the time limit) stops the work at the next window
    return _response(form, run)


def _finish(_model: Any, run: Any, cancel: threading.Event) -> None:
    for _segment in run:
        if cancel.is_set():
            break


def _usage(run: Any) -> dict:
    return {"type": "duration", "seconds": max(1, math.ceil(run.duration))}


def _response(form: TranscriptionForm, run: Any) -> web.Response:
    from mlxctl.audio import formats
    from mlxctl.audio.transcribe import language_name

    fmt = form.response_format
    if fmt == "text":
        return web.Response(text=run.text + "\n", content_type="text/plain")
    if fmt == "srt":
        return web.Response(text=formats.srt(run.segments), content_type="text/plain")
    if fmt == "vtt":
        return web.Response(text=formats.vtt(run.segments), content_type="text/vtt")
    if fmt == "json":
        return web.json_response({"text": run.text, "usage": _usage(run)})
    body: dict[str, Any] = {"task": "transcribe", "language": language_name(run.language),
                            "duration": round(run.duration, 3), "text": run.text}
    if "segment" in form.granularities:
        body["segments"] = [formats.segment_json(s, full=True) for s in run.segments]
    if "word" in form.granularities:
        body["words"] = [{"word": w["word"].strip(), "start": w["start"], "end": w["end"]}
                         for s in run.segments for w in (s.words or [])]
    body["usage"] = _usage(run)
    return web.json_response(body)


async def _stream(request: web.Request, service: SttService, run: Any) -> web.StreamResponse:
    """Segments as ``transcript.text.delta`` events while the thread decodes, then ``.done``."""
    from mlxctl.server.sse import open_sse, send

    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()
    cancel = threading.Event()

    def produce(_model: Any) -> None:
        try:
            for segment in run:
                loop.call_soon_threadsafe(queue.put_nowait, ("segment", segment))
                if cancel.is_set():
                    return
        except Exception as exc:  # noqa: BLE001 (sent to the client as an error event)
            loop.call_soon_threadsafe(queue.put_nowait, ("error", exc))
            return
        loop.call_soon_threadsafe(queue.put_nowait, ("done", None))

    resp = await open_sse(request)
    work = asyncio.ensure_future(service.call(produce))
    work.add_done_callback(lambda f: f.cancelled() or f.exception())  # never "exception not retrieved"
    sent = ""
    try:
        while True:
            kind, value = await queue.get()
            if kind == "segment":
                delta = value.text.lstrip() if not sent else value.text
                sent += delta
                await send(resp, {"type": "transcript.text.delta", "delta": delta, "logprobs": None},
                           event="transcript.text.delta")
            elif kind == "done":
                await send(resp, {"type": "transcript.text.done", "text": run.text, "logprobs": None,
                                  "usage": _usage(run)}, event="transcript.text.done")
                break
            else:
                log.error("stt: transcription failed: %s", value)
                message = getattr(value, "message", None) or f"{type(value).__name__}: {value}"
                await send(resp, {"type": "error", "error": {"message": message, "type": "server_error",
                                                             "param": None, "code": None}}, event="error")
                break
    except ConnectionError:
        pass  # the client left: stop at the next segment
    finally:
        cancel.set()  # a client gone mid-file stops the work at the next window
    return resp


# --- text-to-speech: POST /v1/audio/speech, GET /v1/audio/voices ----------------------------
#
# The body is OpenAI's: ``input`` (at most MAX_INPUT_CHARS characters), ``voice`` (a name from
# /v1/audio/voices, or {"id": name}; default: jf_alpha or the first), ``model`` (the served name or
# OpenAI's ids, which mean it too), ``response_format`` (wav or pcm; mp3, opus, aac and flac only
# where ffmpeg is installed to encode them, else a 400; default wav), ``speed`` (0.25 to 4) and
# ``stream_format``: ``audio`` sends the audio as a chunked body, a sentence at a time (a WAV
# header with 0xFFFFFFFF sizes first), ``sse`` sends ``speech.audio.delta`` events with base64
# chunks, then ``speech.audio.done``. Audio is 24 kHz mono, 16-bit. The body starts once the
# first sentence is synthesised, so failures before that are ordinary error responses.

TTS_OPENAI_IDS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")  # clients hard-code these
SPEECH_FIELDS = {"model", "input", "voice", "instructions", "response_format", "speed", "stream_format"}
SPEECH_MEDIA = {"wav": "audio/wav", "pcm": "audio/pcm"}
ENCODED = {"mp3": ("audio/mpeg", ["-f", "mp3"]), "opus": ("audio/ogg", ["-c:a", "libopus", "-f", "ogg"]),
           "aac": ("audio/aac", ["-c:a", "aac", "-f", "adts"]), "flac": ("audio/flac", ["-f", "flac"])}
STREAM_FORMATS = ("audio", "sse")
MAX_INPUT_CHARS = 4096  # OpenAI's limit too


class TtsService:
    """The server's text-to-speech model on a thread of its own, loaded once."""

    def __init__(self, ref: str | None):
        from mlxctl.models.catalog import default_model

        self.ref = ref
        self.name = _served_name(ref) if ref else default_model("tts")
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mlxctl-tts")
        self._folder: Any = None
        self._model: Any = None
        self._stream: Any = None

    def start(self) -> None:
        """Begin loading now (a failure is reported to the requests that need the model)."""
        self._executor.submit(self._quiet_load)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(model, *args)`` on the model's thread, the model loaded first."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, partial(self._job, fn, *args))

    async def voices(self) -> list[str]:
        """The model's voice names (its folder is found, converted if need be, but not loaded)."""
        from mlxctl.audio.speak import voice_files

        return await asyncio.get_running_loop().run_in_executor(
            self._executor, lambda: sorted(voice_files(self._resolve().path)))

    def _job(self, fn: Callable[..., Any], *args: Any) -> Any:
        import mlx.core as mx

        if self._stream is None:
            self._stream = mx.new_stream(mx.default_device())
        with mx.stream(self._stream):
            return fn(self._load(), *args)

    def _resolve(self) -> Any:
        if self._folder is None:
            from mlxctl.audio.models import resolve_tts

            try:
                self._folder = resolve_tts(self.ref, progress=lambda m: log.info("tts: %s", m))
            except MlxctlError as err:
                raise ApiError(503, f"the text-to-speech model {self.name} could not be loaded: {err.message}",
                               code="model_not_loaded") from err
        return self._folder

    def _load(self) -> Any:
        if self._model is None:
            from mlxctl.audio.speak import load_kokoro

            folder = self._resolve()
            try:
                self._model = load_kokoro(folder.path, self.name)
            except MlxctlError as err:
                raise ApiError(503, f"the text-to-speech model {self.name} could not be loaded: {err.message}",
                               code="model_not_loaded") from err
            log.info("tts: %s loaded from %s", self.name, folder.path)
        return self._model

    def _quiet_load(self) -> None:
        import mlx.core as mx

        try:
            self._stream = mx.new_stream(mx.default_device())
            with mx.stream(self._stream):
                self._load()
        except Exception as exc:  # noqa: BLE001 (the requests report it)
            log.warning("tts: %s", getattr(exc, "message", exc))


@dataclass
class SpeechRequest:
    input: str
    model: str | None = None
    voice: str | None = None
    response_format: str = "wav"
    speed: float = 1.0
    stream_format: str = "audio"


async def read_speech(request: web.Request) -> SpeechRequest:
    """The JSON body, checked field by field (400s name the field)."""
    from mlxctl.server.body import read_json

    data = await read_json(request)
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    for name in data:
        if name not in SPEECH_FIELDS:
            raise ApiError(400, f"unsupported field '{name}': mlxctl does not implement it", param=name)
    text = data.get("input")
    if not isinstance(text, str):
        raise ApiError(400, "missing the 'input' field (the text to speak)" if text is None
                       else "invalid field 'input': must be a string", param="input")
    if not text.strip():
        raise ApiError(400, "invalid field 'input': it is empty", param="input")
    if len(text) > MAX_INPUT_CHARS:
        raise ApiError(400, f"invalid field 'input': {len(text)} characters, over the limit of {MAX_INPUT_CHARS}",
                       param="input")
    body = SpeechRequest(input=text, model=_text_field(data, "model"), voice=_voice_field(data.get("voice")))
    if data.get("instructions"):
        raise ApiError(400, "invalid field 'instructions': Kokoro's voices take no instructions",
                       param="instructions")
    fmt = (_text_field(data, "response_format") or "wav").lower()
    if fmt not in SPEECH_MEDIA and fmt not in ENCODED:
        raise ApiError(400, f"invalid field 'response_format': {fmt!r} is not one of "
                            f"{', '.join([*SPEECH_MEDIA, *ENCODED])}", param="response_format")
    if fmt in ENCODED and _ffmpeg() is None:
        raise ApiError(400, f"invalid field 'response_format': {fmt} needs ffmpeg to encode it, which this "
                            "server does not have; use wav or pcm", param="response_format")
    body.response_format = fmt
    speed = data.get("speed", 1.0)
    if speed is None:
        speed = 1.0
    if isinstance(speed, bool) or not isinstance(speed, (int, float)) or not math.isfinite(speed):
        raise ApiError(400, "invalid field 'speed': must be a number", param="speed")
    if not 0.25 <= speed <= 4.0:
        raise ApiError(400, f"invalid field 'speed': {speed:g} is not between 0.25 and 4.0", param="speed")
    body.speed = float(speed)
    stream = (_text_field(data, "stream_format") or "audio").lower()
    if stream not in STREAM_FORMATS:
        raise ApiError(400, f"invalid field 'stream_format': {stream!r} is not audio or sse", param="stream_format")
    body.stream_format = stream
    return body


def _text_field(data: dict, name: str) -> str | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ApiError(400, f"invalid field '{name}': must be a string", param=name)
    return value.strip() or None


def _voice_field(value: Any) -> str | None:
    if isinstance(value, dict) and set(value) == {"id"}:
        value = value["id"]
    if value is None:
        return None
    if not isinstance(value, str):
        raise ApiError(400, "invalid field 'voice': give a voice name or {\"id\": name}", param="voice")
    return value.strip() or None


def _ffmpeg() -> str | None:
    import shutil

    return shutil.which("ffmpeg")


def check_tts_model(service: TtsService, name: str | None) -> None:
    if name is not None and name not in (service.name, *TTS_OPENAI_IDS):
        raise ApiError(404, f"model '{name}' not found: this server speaks with '{service.name}' "
                            f"(or say {', '.join(TTS_OPENAI_IDS)})", param="model", code="model_not_found")


async def voices(request: web.Request) -> web.Response:
    from mlxctl.audio.speak import default_voice, voice_info

    service: TtsService = request.app[TTS]
    check_tts_model(service, request.query.get("model") or None)
    names = await service.voices()
    if not names:
        raise ApiError(503, f"the text-to-speech model {service.name} has no voices", code="model_not_loaded")
    return web.json_response({"object": "list", "model": service.name, "default": default_voice(names),
                              "voices": names, "data": [voice_info(n) for n in names]})


async def speech(request: web.Request) -> web.StreamResponse:
    from mlxctl.errors import BadInputError

    service: TtsService = request.app[TTS]
    body = await read_speech(request)
    check_tts_model(service, body.model)
    try:
        voice = await service.call(lambda model: model.check_voice(body.voice))
    except BadInputError as err:
        raise ApiError(400, f"invalid field 'voice': {err.message}", param="voice") from err
    try:
        run = await service.call(lambda model: model.speak(body.input, voice=voice, speed=body.speed))
    except BadInputError as err:
        raise ApiError(400, f"invalid field 'input': {err.message}", param="input") from err
    except MlxctlError as err:
        raise ApiError.from_mlxctl(err) from err
    return await _Speaking(request, service, run, body).respond()


class _Speaking:
    """One request's audio: synthesised on the model's thread, sent as each chunk is ready."""

    def __init__(self, request: web.Request, service: TtsService, run: Any, body: SpeechRequest):
        self.request, self.service, self.run, self.body = request, service, run, body
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue = asyncio.Queue()
        self.cancel = threading.Event()
        self.deadline = self.loop.time() + request.app[SETTINGS].request_timeout_s

    def _produce(self, _model: Any) -> None:
        from mlxctl.audio.speak import pcm16

        put = partial(self.loop.call_soon_threadsafe, self.queue.put_nowait)
        try:
            for samples in self.run:
                put(("audio", pcm16(samples)))
                if self.cancel.is_set():
                    return
        except Exception as exc:  # noqa: BLE001 (sent to the client)
            put(("error", exc))
            return
        put(("done", None))

    async def _next(self) -> tuple[str, Any]:
        try:
            return await asyncio.wait_for(self.queue.get(), max(0.0, self.deadline - self.loop.time()))
        except TimeoutError:
            limit = self.request.app[SETTINGS].request_timeout_s
            return "timeout", f"the speech took longer than the server's limit of {limit:g} s (serve --request-timeout)"

    async def respond(self) -> web.StreamResponse:
        work = asyncio.ensure_future(self.service.call(self._produce))
        work.add_done_callback(lambda f: f.cancelled() or f.exception())  # never "exception not retrieved"
        try:
            first = await self._next()
            if first[0] != "audio":
                raise _failure(*first)
            if self.body.response_format in ENCODED:
                return await self._encoded(first[1])
            if self.body.stream_format == "sse":
                return await self._sse(first[1])
            return await self._audio(first[1])
        finally:
            self.cancel.set()  # a client gone mid-way (or the time limit) stops at the next chunk

    def _header(self) -> bytes:
        from mlxctl.audio.speak import wav_header

        return wav_header(self.run.sample_rate) if self.body.response_format == "wav" else b""

    async def _audio(self, first: bytes) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": SPEECH_MEDIA[self.body.response_format]})
        resp.enable_chunked_encoding()
        await resp.prepare(self.request)
        try:
            await resp.write(self._header() + first)
            while True:
                kind, value = await self._next()
                if kind == "audio":
                    await resp.write(value)
                    continue
                if kind != "done":
                    log.error("tts: speech failed after it began: %s", getattr(value, "message", value))
                    if self.request.transport is not None:  # an unfinished chunked body tells the client
                        self.request.transport.close()
                    return resp
                break
            await resp.write_eof()
        except ConnectionError:
            pass  # the client left: stop at the next chunk
        return resp

    async def _sse(self, first: bytes) -> web.StreamResponse:
        from mlxctl.server.sse import open_sse, send

        resp = await open_sse(self.request)
        data: bytes | None = self._header() + first
        try:
            while True:
                if data is not None:
                    await self._delta(resp, data)
                kind, value = await self._next()
                if kind == "audio":
                    data = value
                    continue
                if kind == "done":
                    await send(resp, {"type": "speech.audio.done", "usage": self._usage()}, event="speech.audio.done")
                else:
                    message = getattr(value, "message", None) or str(value)
                    log.error("tts: speech failed after it began: %s", message)
                    await send(resp, {"type": "error", "error": {"message": message, "type": "server_error",
                                                                 "param": None, "code": None}}, event="error")
                break
        except ConnectionError:
            pass
        return resp

    async def _delta(self, resp: web.StreamResponse, data: bytes) -> None:
        import base64

        from mlxctl.server.sse import send

        await send(resp, {"type": "speech.audio.delta", "audio": base64.b64encode(data).decode("ascii")},
                   event="speech.audio.delta")

    async def _encoded(self, first: bytes) -> web.StreamResponse:
        """mp3, opus, aac, flac: the whole speech encoded by ffmpeg once it is done."""
        pcm = [first]
        while True:
            kind, value = await self._next()
            if kind == "done":
                break
            if kind != "audio":
                raise _failure(kind, value)
            pcm.append(value)
        media, args = ENCODED[self.body.response_format]
        data = await asyncio.to_thread(_encode, b"".join(pcm), self.run.sample_rate, args)
        if self.body.stream_format != "sse":
            return web.Response(body=data, content_type=media)
        from mlxctl.server.sse import open_sse, send

        resp = await open_sse(self.request)
        try:
            await self._delta(resp, data)
            await send(resp, {"type": "speech.audio.done", "usage": self._usage()}, event="speech.audio.done")
        except ConnectionError:
            pass
        return resp

    def _usage(self) -> dict:
        tokens = int(self.run.phonemes)
        return {"input_tokens": tokens, "output_tokens": 0, "total_tokens": tokens}


def _failure(kind: str, value: Any) -> ApiError:
    if kind == "timeout":
        return ApiError(504, str(value), code="timeout")
    if isinstance(value, ApiError):
        return value
    if isinstance(value, MlxctlError):
        return ApiError.from_mlxctl(value)
    log.error("tts: speech failed: %s: %s", type(value).__name__, value)
    return ApiError(500, f"speech failed: {type(value).__name__}: {value}")


def _encode(pcm: bytes, sample_rate: int, args: list[str]) -> bytes:
    """16-bit PCM encoded by ffmpeg (mp3, opus, aac or flac)."""
    import subprocess

    ffmpeg = _ffmpeg()
    if ffmpeg is None:
        raise ApiError(500, "ffmpeg went away: cannot encode the audio")
    done = subprocess.run([ffmpeg, "-nostdin", "-hide_banner", "-loglevel", "error", "-f", "s16le", "-ar",
                           str(sample_rate), "-ac", "1", "-i", "pipe:0", *args, "pipe:1"],
                          input=pcm, capture_output=True, check=False)
    if done.returncode != 0 or not done.stdout:
        reason = done.stderr.decode(errors="replace").strip().splitlines()
        raise ApiError(500, f"ffmpeg could not encode the audio: {reason[-1] if reason else 'no output'}")
    return done.stdout
