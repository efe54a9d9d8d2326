"""`mlxctl speak` and the synthesis under it, with the real Kokoro-82M (a word or two at a time:
synthesis takes about as long as the speech on these CPUs with OpenBLAS, several times longer
without), and the transcription round trip through Whisper."""

# ruff: noqa: F811 (the Kokoro fixtures are imported from test_kokoro_convert and used as arguments)
from __future__ import annotations

import io
import shutil
import struct
import wave

import numpy as np
import pytest
import typer

from mlxctl.audio import speak
from mlxctl.cli.app import app
from mlxctl.cli.context import CliState
from mlxctl.cli.entry import invoke
from mlxctl.errors import BadInputError, ExitStatus
from tests.audio.test_kokoro_convert import kokoro_mlx, kokoro_model  # noqa: F401 (fixtures)

needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng")


class _BinaryOut(io.StringIO):
    """A text stdout with a binary buffer under it, as sys.stdout has."""

    def __init__(self, tty: bool = False):
        super().__init__()
        self.buffer = io.BytesIO()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def mlxctl(*args: str, stdin: str = "", stdout: io.StringIO | None = None) -> tuple[int, io.StringIO, str]:
    state = CliState(debug=False, stdin=io.StringIO(stdin), stdout=stdout or _BinaryOut(), stderr=io.StringIO())
    status = invoke(typer.main.get_command(app), list(args), state)
    return status, state.stdout, state.stderr.getvalue()


def rms(samples: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(samples, dtype=np.float64))))


def read_wav(data: bytes) -> tuple[np.ndarray, wave.Wave_read]:
    with wave.open(io.BytesIO(data)) as w:
        frames = w.readframes(w.getnframes())
        return np.frombuffer(frames, "<i2").astype(np.float32) / 32768.0, w


# --- pieces that need no model --------------------------------------------------------------


def test_fast_convolutions_match_mlx():
    import mlx.core as mx

    mx.random.seed(0)
    for length, c_in, c_out, kernel, stride, padding, dilation in [(300, 16, 8, 11, 1, 25, 5), (97, 8, 4, 3, 2, 1, 1),
                                                                   (64, 8, 8, 7, 1, 9, 3), (5, 4, 4, 1, 1, 0, 1)]:
        x, w = mx.random.normal((1, length, c_in)), mx.random.normal((c_out, kernel, c_in))
        want = mx.conv1d(x, w, stride=stride, padding=padding, dilation=dilation)
        assert mx.allclose(speak.conv1d(x, w, stride, padding, dilation), want, atol=1e-4).item()
    for length, c_in, c_out, kernel, stride, padding in [(30, 16, 8, 20, 10, 5), (30, 8, 4, 12, 6, 3), (25, 8, 4, 3, 2, 1),
                                                         (20, 4, 4, 7, 3, 0)]:
        x, w = mx.random.normal((1, length, c_in)), mx.random.normal((c_out, kernel, c_in))
        want = mx.conv_transpose1d(x, w, stride=stride, padding=padding)
        got = speak.conv_transpose1d(x, w, stride, padding)
        assert got.shape == want.shape and mx.allclose(got, want, atol=1e-4).item()


def test_streaming_wav_header_and_its_repair(tmp_path):
    header = speak.wav_header(24000)
    assert len(header) == 44 and header[:4] == b"RIFF" and struct.unpack("<I", header[40:])[0] == 0xFFFFFFFF
    samples = np.sin(np.linspace(0, 100, 2400)).astype(np.float32) * 0.5
    with open(tmp_path / "a.wav", "wb") as f:
        f.write(header + speak.pcm16(samples))
        assert speak.fix_wav_sizes(f)
    decoded, info = read_wav((tmp_path / "a.wav").read_bytes())
    assert info.getframerate() == 24000 and info.getnchannels() == 1 and info.getsampwidth() == 2
    np.testing.assert_allclose(decoded, samples, atol=1e-4)


def test_voice_speed_and_format_checks():
    names = ["jf_alpha", "jm_kumo"]
    assert speak.check_voice(None, names) == "jf_alpha" and speak.check_voice("jm_kumo", names) == "jm_kumo"
    with pytest.raises(BadInputError, match="jf_alpha, jm_kumo"):
        speak.check_voice("alloy", names, "kokoro-82m")
    for bad in (0.1, 5, "fast"):
        with pytest.raises(BadInputError):
            speak.check_speed(bad)
    with pytest.raises(BadInputError, match="use wav, pcm, mp3, opus, aac, flac"):
        speak.check_format("wma")
    assert speak.check_format(" MP3 ") == "mp3"
    assert speak.voice_info("jm_kumo") == {"id": "jm_kumo", "name": "jm_kumo", "language": "ja", "gender": "male"}
    assert speak.voice_info("custom")["gender"] is None


@pytest.mark.parametrize("args, status, message", [
    (["speak", "--format", "wma", "hi"], ExitStatus.BAD_INPUT, "unknown audio format"),
    (["speak"], ExitStatus.BAD_INPUT, "there is no text to speak"),
    (["speak", "-", "-o", "x.wav"], ExitStatus.BAD_INPUT, "there is no text to speak"),
    (["speak", "--speed", "9", "hi"], ExitStatus.USAGE, "--speed"),
])
def test_bad_input_fails_before_any_model(tmp_path, monkeypatch, args, status, message):
    monkeypatch.setenv("MLXCTL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MLXCTL_OFFLINE", "1")
    code, out, err = mlxctl(*args, stdin="  \n")
    assert code == status, err
    assert message in err and out.buffer.getvalue() == b""


def test_missing_espeak_exits_6_in_one_line(tmp_path, monkeypatch):
    from mlxctl.audio import phonemes

    monkeypatch.setenv("MLXCTL_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(phonemes.shutil, "which", lambda name: None)
    code, _, err = mlxctl("speak", "hello", "-o", str(tmp_path / "x.wav"))
    assert code == ExitStatus.UNAVAILABLE, err
    assert err.startswith("mlxctl: error: espeak-ng is not installed") and "apt-get install espeak-ng" in err
    assert "Traceback" not in err and not (tmp_path / "x.wav").exists()


def test_audio_is_not_written_to_a_terminal(tmp_path):
    code, _, err = mlxctl("speak", "hello", stdout=_BinaryOut(tty=True))
    assert code == ExitStatus.BAD_INPUT and "refusing to write audio to a terminal" in err


def test_play_without_a_player(tmp_path, monkeypatch):
    monkeypatch.setattr(speak, "find_player", lambda: None)
    code, _, err = mlxctl("speak", "--play", "hello")
    assert code == ExitStatus.UNAVAILABLE and "found no audio player" in err and "aplay" in err


# --- with the model -------------------------------------------------------------------------


@needs_espeak  # checked first: without it the command stops there (exit 6)
def test_unknown_voice_lists_the_voices(kokoro_mlx):
    code, _, err = mlxctl("speak", "-m", str(kokoro_mlx.path), "--voice", "alloy", "hi")
    assert code == ExitStatus.BAD_INPUT
    assert "unknown voice 'alloy'" in err and "jf_alpha, jf_gongitsune, jf_nezumi, jf_tebukuro, jm_kumo" in err


def test_list_voices(kokoro_mlx):
    code, out, err = mlxctl("speak", "-m", str(kokoro_mlx.path), "--list-voices")
    assert code == 0, err
    assert out.getvalue().splitlines() == ["jf_alpha  (default)", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo"]


@needs_espeak
def test_one_word_is_real_speech(kokoro_model):
    run = kokoro_model.speak("Hello.", voice="jf_alpha")
    assert [c.phonemes for c in run.chunks] == ["həlˈO."]
    audio = np.concatenate(list(run))
    assert audio.dtype == np.float32 and run.sample_rate == 24000
    assert 0.3 < run.duration < 3.0, run.duration  # "hello" takes about a second
    assert rms(audio) > 0.01 and np.abs(audio).max() <= 1.5


@needs_espeak
def test_speak_writes_a_valid_wav_and_warns_without_a_player(kokoro_mlx, tmp_path, monkeypatch):
    monkeypatch.setattr(speak, "find_player", lambda: None)  # --play finds nothing: -o still written
    path = tmp_path / "hi.wav"
    code, _, err = mlxctl("speak", "-m", str(kokoro_mlx.path), "--voice", "jm_kumo", "-o", str(path), "--play", "Hi!")
    assert code == 0, err
    assert "found no audio player" in err and "s of speech to" in err
    samples, info = read_wav(path.read_bytes())
    assert (info.getframerate(), info.getnchannels(), info.getsampwidth()) == (24000, 1, 2)
    assert struct.unpack("<I", path.read_bytes()[40:44])[0] == 2 * samples.size  # sizes written at the end
    assert 0.2 < samples.size / 24000 < 3.0 and rms(samples) > 0.01


@needs_espeak
def test_stdout_gets_streaming_wav_or_raw_pcm(kokoro_mlx):
    from mlxctl.audio.decode import decode_audio

    code, out, err = mlxctl("speak", "-m", str(kokoro_mlx.path), "Yes.")
    assert code == 0, err
    data = out.buffer.getvalue()
    assert data[:4] == b"RIFF" and data[8:16] == b"WAVEfmt " and struct.unpack("<I", data[40:44])[0] == 0xFFFFFFFF
    samples = decode_audio(data)  # what a reader of a streamed WAV gets (16 kHz after resampling)
    assert 0.2 < samples.size / 16000 < 3.0 and rms(samples) > 0.01
    code, out, err = mlxctl("speak", "-m", str(kokoro_mlx.path), "--format", "pcm", "-", stdin="No.")
    assert code == 0, err
    pcm = out.buffer.getvalue()
    assert len(pcm) % 2 == 0 and pcm[:4] != b"RIFF" and 0.2 < len(pcm) / 2 / 24000 < 3.0


@pytest.mark.slow
@needs_espeak
def test_whisper_hears_what_kokoro_says(kokoro_model, tiny_model):
    """The strongest check: the Whisper side transcribes the speech back to the words."""
    run = kokoro_model.speak("Hello world.", voice="jm_kumo")
    audio = np.concatenate(list(run))
    from mlxctl.audio.decode import decode_audio

    samples = decode_audio(speak.wav_header(24000, 2 * audio.size) + speak.pcm16(audio))
    text = tiny_model.transcribe(samples, language="en")
    list(text)
    assert "hello" in text.text.lower() and "world" in text.text.lower(), text.text


# --- model convert and serve --tts-model ----------------------------------------------------


def test_model_convert_kokoro(kokoro_mlx, model_home, monkeypatch):
    import json

    monkeypatch.setenv("MLXCTL_HOME", str(model_home))
    monkeypatch.setenv("MLXCTL_OFFLINE", "1")
    code, out, err = mlxctl("model", "convert", "kokoro-82m", "--json")
    assert code == 0, err
    result = json.loads(out.getvalue())
    assert result["path"] == str(kokoro_mlx.path) and result["converted"] is False
    assert result["manifest"]["recipe"]["method"] == "onnx-kokoro"
    code, _, err = mlxctl("model", "convert", "kokoro-82m", "--quantize", "4")
    assert code == ExitStatus.BAD_INPUT and "unquantized" in err


def test_tts_references_are_checked_up_front(kokoro_mlx, model_home, tmp_path, monkeypatch):
    from mlxctl.audio.models import check_tts_ref, tts_source
    from mlxctl.errors import ModelNotFoundError
    from mlxctl.models.store import ModelStore

    store = ModelStore(model_home)
    check_tts_ref("kokoro-82m", store)
    check_tts_ref(str(kokoro_mlx.path), store)
    assert tts_source("kokoro-82m", store) and tts_source(str(model_home / "models" / "kokoro-82m"), store)
    assert not tts_source(str(kokoro_mlx.path), store) and not tts_source("whisper-tiny-en", store)
    with pytest.raises(BadInputError, match="not text-to-speech"):
        check_tts_ref("smollm2-135m", store)
    with pytest.raises(ModelNotFoundError):
        check_tts_ref(str(tmp_path / "nothing"), store)
    monkeypatch.setenv("MLXCTL_HOME", str(tmp_path / "home"))
    code, _, err = mlxctl("serve", "--tts-model", "whisper-tiny-en")
    assert code == ExitStatus.BAD_INPUT and "not text-to-speech" in err
