"""POST /v1/audio/speech and GET /v1/audio/voices: OpenAI's text-to-speech endpoints, over
mlx-audio Kokoro.

The body is OpenAI's: ``input`` (at most MAX_INPUT_CHARS characters), ``voice`` (a name from
/v1/audio/voices, or {"id": name}; default: jf_alpha or the first), ``model`` (the served name or
OpenAI's ids, which mean it too), ``response_format`` (wav, pcm, or mp3, opus, aac, flac encoded
in-process by PyAV; default wav), ``speed`` (0.25 to 4) and ``stream_format``: ``audio`` sends
the audio as a chunked body, a sentence at a time (a WAV header with 0xFFFFFFFF sizes first;
each sentence of a compressed format encoded as it is ready), ``sse`` sends
``speech.audio.delta`` events with base64 chunks of the same bytes, then ``speech.audio.done``.
Audio is 24 kHz mono (Opus 48 kHz), 16-bit for wav and pcm. The body starts once the first
sentence is synthesised, so failures before that are ordinary error responses.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
from dataclasses import dataclass
from functools import partial
from typing import Any

from aiohttp import web

from mlxctl.audio.encode import ENCODED
from mlxctl.errors import MlxctlError
from mlxctl.server.errors import ApiError
from mlxctl.server.served_model import check_side_model
from mlxctl.server.keys import SETTINGS
from mlxctl.server.model_thread import ModelThread

log = logging.getLogger("mlxctl.server")

TTS = web.AppKey("tts", Any)  # TtsService
TTS_OPENAI_IDS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")  # clients hard-code these
SPEECH_FIELDS = {"model", "input", "voice", "instructions", "response_format", "speed", "stream_format"}
SPEECH_MEDIA = {"wav": "audio/wav", "pcm": "audio/pcm"}
STREAM_FORMATS = ("audio", "sse")
MAX_INPUT_CHARS = 4096  # OpenAI's limit too


class TtsService(ModelThread):
    """The server's text-to-speech model on a thread of its own, loaded once."""

    label, kind, what = "tts", "tts", "text-to-speech"

    def __init__(self, ref: str | None):
        super().__init__(ref)
        self._folder: Any = None

    async def voices(self) -> list[str]:
        """The model's voice names (its folder is found, converted if need be, but not loaded)."""
        from mlxctl.audio.speak import voice_files

        return await self.run(lambda: sorted(voice_files(self._resolve().path)))

    def _resolve(self) -> Any:
        if self._folder is None:
            from mlxctl.audio.models import resolve_tts

            try:
                self._folder = resolve_tts(self.ref, progress=self.progress)
            except MlxctlError as err:
                raise self.unavailable(err) from err
        return self._folder

    def _open(self) -> tuple[Any, Any]:
        from mlxctl.audio.speak import load_kokoro

        folder = self._resolve()
        return load_kokoro(folder.path, self.name), folder.path


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


def check_tts_model(service: TtsService, name: str | None) -> None:
    check_side_model(name, service.name, TTS_OPENAI_IDS, "speaks")


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
        """On the model's thread: each chunk synthesised, turned into the response's bytes, queued
        (encoding a sentence takes milliseconds beside the seconds its synthesis takes)."""
        from mlxctl.audio.encode import Encoder
        from mlxctl.audio.speak import pcm16

        put = partial(self.loop.call_soon_threadsafe, self.queue.put_nowait)
        encoder = None
        try:
            if self.body.response_format in ENCODED:
                encoder = Encoder(self.body.response_format, self.run.sample_rate)
            for samples in self.run:
                put(("audio", encoder.encode(samples) if encoder is not None else pcm16(samples)))
                if self.cancel.is_set():
                    return
            if encoder is not None:
                put(("audio", encoder.finish()))
        except Exception as exc:  # noqa: BLE001 (sent to the client)
            put(("error", exc))
            return
        finally:
            if encoder is not None:
                encoder.close()
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
            if self.body.stream_format == "sse":
                return await self._sse(first[1])
            return await self._audio(first[1])
        finally:
            self.cancel.set()  # a client gone mid-way (or the time limit) stops at the next chunk

    def _header(self) -> bytes:
        from mlxctl.audio.speak import wav_header

        return wav_header(self.run.sample_rate) if self.body.response_format == "wav" else b""

    async def _audio(self, first: bytes) -> web.StreamResponse:
        fmt = self.body.response_format
        media = ENCODED[fmt].media_type if fmt in ENCODED else SPEECH_MEDIA[fmt]
        resp = web.StreamResponse(headers={"Content-Type": media})
        resp.enable_chunked_encoding()
        await resp.prepare(self.request)
        try:
            data = self._header() + first
            while True:
                if data:  # an encoder may still hold a short chunk: nothing to send yet
                    await resp.write(data)
                kind, value = await self._next()
                if kind == "audio":
                    data = value
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
        data = self._header() + first
        try:
            while True:
                if data:
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
