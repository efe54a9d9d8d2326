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
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
from dataclasses import dataclass, field
from typing import Any

from aiohttp import BodyPartReader, web

from mlxctl.errors import MlxctlError
from mlxctl.server.errors import ApiError
from mlxctl.server.served_model import check_side_model
from mlxctl.server.keys import SETTINGS
from mlxctl.server.model_thread import ModelThread

log = logging.getLogger("mlxctl.server")

STT = web.AppKey("stt", Any)  # SttService
FORMATS = ("json", "text", "srt", "verbose_json", "vtt")
GRANULARITIES = ("segment", "word")
OPENAI_IDS = ("whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe")  # clients hard-code these
FIELDS = {"file", "model", "language", "prompt", "response_format", "temperature", "timestamp_granularities[]",
          "timestamp_granularities", "stream"}
CHUNK = 1 << 16


class SttService(ModelThread):
    """The server's speech-to-text model on a thread of its own, loaded once."""

    label, kind, what = "stt", "stt", "speech-to-text"

    def _open(self) -> tuple[Any, Any]:
        from mlxctl.audio.models import resolve_stt
        from mlxctl.audio.transcribe import load_whisper

        folder = resolve_stt(self.ref, progress=self.progress)
        return load_whisper(folder.path, self.name), folder.path


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
    check_side_model(name, service.name, OPENAI_IDS, "transcribes")


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


