"""`mlxctl transcribe`: speech in an audio file (or stdin) to text, SRT, WebVTT or JSON."""

from __future__ import annotations

from typing import Annotated

import typer

from mlxctl.cli.blas import ensure_fast_blas
from mlxctl.cli.context import output_for
from mlxctl.cli.output import Output
from mlxctl.errors import BadInputError

FORMATS = ("text", "srt", "vtt", "json")

AudioArg = Annotated[str | None, typer.Argument(
    metavar="AUDIO", show_default=False,
    help="Audio file (WAV, FLAC, MP3, Ogg Vorbis; other formats need ffmpeg); '-' or omitted: stdin.")]
ModelOpt = Annotated[str | None, typer.Option(
    "--model", "-m", metavar="MODEL", show_default=False,
    help="Catalog name (default: whisper-tiny-en; whisper-base is multilingual), store name, "
    "faster-whisper folder or mlx-audio Whisper folder. Catalog models are converted on first use.")]
FormatOpt = Annotated[str, typer.Option(
    "--format", "-f", metavar="FORMAT", help="text (one line per segment), srt, vtt or json.")]
LanguageOpt = Annotated[str | None, typer.Option(
    "--language", "-l", metavar="LANG", show_default=False,
    help="Spoken language, as a code (en, de) or name; default: detected (English-only models: en).")]
PromptOpt = Annotated[str | None, typer.Option(
    "--prompt", metavar="TEXT", show_default=False,
    help="Text that came before, or words to spell as given (names, jargon).")]
TemperatureOpt = Annotated[float, typer.Option(
    "--temperature", "-t", metavar="T", min=0.0, max=1.0,
    help="0: greedy, retried hotter when a window decodes badly; above 0: sample at T.")]
JsonFlag = Annotated[bool, typer.Option(
    "--json", help="Same as --format json: one JSON document with the segments' start and end.")]


def transcribe(
    ctx: typer.Context,
    audio: AudioArg = None,
    model: ModelOpt = None,
    format_: FormatOpt = "text",
    language: LanguageOpt = None,
    prompt: PromptOpt = None,
    temperature: TemperatureOpt = 0.0,
    json_: JsonFlag = False,
) -> None:
    """Transcribe the speech in AUDIO.

    Segments are printed as each 30-second window is decoded (text, srt and vtt); json prints
    one document at the end. The model runs in float32 on the CPU.
    """
    ensure_fast_blas()  # before stdin is read: it may re-execute this process
    fmt = format_.strip().lower()
    if json_ and fmt not in ("text", "json"):
        raise BadInputError(f"--json and --format {format_} disagree", hint="give one of them")
    fmt = "json" if json_ else fmt
    if fmt not in FORMATS:
        raise BadInputError(f"unknown format {format_!r}", hint=f"use one of: {', '.join(FORMATS)}")
    out = output_for(ctx, json=fmt == "json")
    from mlxctl.audio.transcribe import language_code

    language_code(language)  # an unknown language fails before any work
    samples = _read_audio(audio, out)
    from mlxctl.audio.models import resolve_stt
    from mlxctl.audio.transcribe import load_whisper

    folder = resolve_stt(model, progress=out.message)
    whisper = load_whisper(folder.path, folder.name)
    run = whisper.transcribe(samples, language=language, prompt=prompt, temperature=temperature)
    _print(out, fmt, run, whisper.name)


def _read_audio(audio: str | None, out: Output):
    from pathlib import Path

    from mlxctl.audio.decode import decode_audio, read_audio_file

    if audio is not None and audio != "-":
        return read_audio_file(Path(audio))
    if audio is None and out.stdin_is_tty:
        raise BadInputError("no audio given", hint="pass an audio file, or pipe one on stdin")
    stream = getattr(out.stdin, "buffer", out.stdin)
    data = stream.read()
    if isinstance(data, str):
        data = data.encode("latin-1", errors="replace")
    return decode_audio(data, name="the audio on stdin")


def _print(out: Output, fmt: str, run, model_name: str) -> None:
    from mlxctl.audio import formats

    if fmt == "json":
        list(run)
        out.data({"model": model_name, "language": run.language, "duration": round(run.duration, 3),
                  "text": run.text, "segments": [formats.segment_json(s) for s in run.segments]})
        return
    if fmt == "vtt":
        out.text(formats.VTT_HEADER)
    count = 0
    for segment in run:
        if fmt == "text":
            out.text(formats.cue_text(segment.text) + "\n")
        elif fmt == "srt":
            count += 1
            out.text(formats.srt_cue(count, segment))
        else:
            out.text(formats.vtt_cue(segment))
    if not run.segments:
        out.message("mlxctl: no speech found")
