"""`mlxctl transcribe` and `mlxctl model convert` for Whisper, run as users run them."""

from __future__ import annotations

import io
import json

import pytest
import typer

from mlxctl.cli.app import app
from mlxctl.cli.context import CliState
from mlxctl.cli.entry import invoke
from mlxctl.errors import ExitStatus
from tests.audio.helpers import toy_faster_whisper


class _Bytes(io.StringIO):
    """A text stdin with a binary buffer under it, as sys.stdin has."""

    def __init__(self, data: bytes):
        super().__init__()
        self.buffer = io.BytesIO(data)


def mlxctl(*args: str, stdin: io.StringIO | None = None) -> tuple[int, str, str]:
    state = CliState(debug=False, stdin=stdin or io.StringIO(), stdout=io.StringIO(), stderr=io.StringIO())
    status = invoke(typer.main.get_command(app), list(args), state)
    return status, state.stdout.getvalue(), state.stderr.getvalue()


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("MLXCTL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MLXCTL_OFFLINE", "1")  # nothing here may reach PyPI
    return tmp_path / "home"


@pytest.mark.parametrize("args, message", [
    (["transcribe", "/no/such/file.wav"], "no such audio file"),
    (["transcribe", "--format", "docx", "x.wav"], "unknown format"),
    (["transcribe", "--language", "klingon", "x.wav"], "unknown language"),
    (["transcribe", "-m", "smollm2-135m", "{wav}"], "not speech-to-text"),
])
def test_bad_input_is_one_line_and_exit_4(home, tmp_path, args, message):
    from tests.audio.conftest import tone, write_wav

    wav = write_wav(tmp_path / "t.wav", tone(0.2))
    status, out, err = mlxctl(*[a.replace("{wav}", str(wav)) for a in args])
    assert status == ExitStatus.BAD_INPUT, err
    assert out == "" and err.startswith("mlxctl: error: ") and message in err


def test_undecodable_audio_exits_4_before_any_model_loads(home, tmp_path):
    junk = tmp_path / "junk.wav"
    junk.write_bytes(b"RIFF" + bytes(range(256)) * 8)
    status, _, err = mlxctl("transcribe", str(junk))
    assert status == ExitStatus.BAD_INPUT and "cannot decode" in err
    status, _, err = mlxctl("transcribe", "-", stdin=_Bytes(b"not audio at all" * 50))
    assert status == ExitStatus.BAD_INPUT and "the audio on stdin" in err
    assert not (home / "models").exists()  # nothing was fetched or converted


def test_model_convert_a_faster_whisper_folder(home, tmp_path):
    src = toy_faster_whisper(tmp_path / "fw-toy")
    status, out, err = mlxctl("model", "convert", str(src), "--json")
    assert status == 0, err
    result = json.loads(out)
    assert result["name"] == "fw-toy-mlx" and result["converted"] is True
    manifest = result["manifest"]
    assert manifest["recipe"]["method"] == "ctranslate2-whisper" and manifest["kind"] == "stt"
    assert manifest["format"] == "mlx" and manifest["recipe"]["timestamp_tokens_added"] == 1501
    status, out, _ = mlxctl("model", "convert", str(src))
    assert status == 0 and out.startswith("fw-toy-mlx: already in the store")
    status, out, _ = mlxctl("model", "convert", str(src), "--dtype", "float32", "--name", "toy32", "-q")
    assert status == 0 and out.strip().endswith("/toy32")
    status, _, err = mlxctl("model", "convert", str(src), "--quantize", "4")
    assert status == ExitStatus.BAD_INPUT and "unquantized" in err
    status, out, _ = mlxctl("model", "list", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["fw-toy-mlx"]["kind"] == "stt" and rows["toy32"]["format"] == "mlx"


def test_transcribe_speech_as_srt(model_home, monkeypatch, speech):
    monkeypatch.setenv("MLXCTL_HOME", str(model_home))  # the shared cache: converted once
    status, out, err = mlxctl("transcribe", str(speech.path), "--format", "srt")
    assert status == 0, err
    lines = out.splitlines()
    if speech.spoken:
        assert lines[0] == "1" and " --> " in lines[1] and lines[1].startswith("00:00:")
        speech.check(" ".join(lines[2:]))
    else:
        assert out == "" and "no speech found" in err


@pytest.mark.slow
def test_transcribe_stdin_text_and_json(model_home, monkeypatch, speech):
    monkeypatch.setenv("MLXCTL_HOME", str(model_home))
    speech.need_speech()
    status, out, err = mlxctl("transcribe", "-", stdin=_Bytes(speech.path.read_bytes()))
    assert status == 0, err
    speech.check(out)
    status, out, err = mlxctl("transcribe", str(speech.path), "--json")
    assert status == 0, err
    doc = json.loads(out)
    assert doc["model"] == "whisper-tiny-en" and doc["language"] == "en" and doc["duration"] > 1
    assert doc["segments"] and all(s["start"] < s["end"] for s in doc["segments"])
    speech.check(doc["text"])
    status, out, _ = mlxctl("transcribe", str(speech.path), "-f", "vtt")
    assert status == 0 and out.startswith("WEBVTT\n\n00:00:")


@pytest.mark.parametrize("ref, status, message", [
    ("smollm2-135m", ExitStatus.BAD_INPUT, "not speech-to-text"),
    ("/no/such/whisper", ExitStatus.NOT_FOUND, "unknown speech-to-text model"),
])
def test_serve_checks_stt_model_before_loading(home, ref, status, message):
    got, _, err = mlxctl("serve", "--stt-model", ref, "--port", "1")
    assert got == status and message in err
