"""`mlxctl speak` writing mp3, opus, aac and flac: the format from --format or -o's suffix, checked
before any model loads, and the files read back by PyAV (with the real Kokoro-82M)."""

# ruff: noqa: F811 (the Kokoro fixtures are imported from test_kokoro_convert and used as arguments)
from __future__ import annotations

import io
import shutil

import numpy as np
import pytest

from mlxctl.errors import ExitStatus
from tests.audio.test_kokoro_convert import kokoro_mlx  # noqa: F401 (fixture)
from tests.audio.test_speak import _BinaryOut, mlxctl, rms

av = pytest.importorskip("av")
needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng")


def read_encoded(data: bytes) -> tuple[np.ndarray, int, str]:
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        to_float = av.AudioResampler(format="fltp", layout="mono", rate=stream.rate)
        frames = [r.to_ndarray()[0] for f in container.decode(stream) for r in to_float.resample(f)]
        return np.concatenate(frames), stream.rate, container.format.name


@pytest.mark.parametrize("args, message", [
    (["-o", "x.txt"], "cannot tell the audio format from the name 'x.txt'"),
    (["-o", "x.m4a"], "cannot tell the audio format from the name 'x.m4a'"),
    (["--format", "mp3", "-o", "x.wav"], "--format mp3 does not match the name 'x.wav' (wav)"),
    (["-f", "flac", "-o", "x.ogg"], "--format flac does not match the name 'x.ogg' (opus)"),
    (["--format", "ogg"], "unknown audio format 'ogg'"),
])
def test_format_errors_are_one_line_before_any_model(tmp_path, monkeypatch, args, message):
    monkeypatch.setenv("MLXCTL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MLXCTL_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    code, out, err = mlxctl("speak", *args, "hi")
    assert code == ExitStatus.BAD_INPUT, err
    assert err.splitlines()[0].startswith(f"mlxctl: error: {message}"), err
    assert "Traceback" not in err and out.buffer.getvalue() == b"" and not list(tmp_path.glob("x.*"))


@needs_espeak
@pytest.mark.parametrize("name, args, container, rate", [
    ("hi.mp3", [], "mp3", 24000), ("hi.ogg", [], "ogg", 48000), ("hi.aac", ["--format", "aac"], "aac", 24000),
    ("hi.FLAC", [], "flac", 24000), ("hi.audio", ["-f", "opus"], "ogg", 48000)])
def test_the_suffix_or_format_picks_the_encoding(kokoro_mlx, tmp_path, name, args, container, rate):
    path = tmp_path / name
    code, _, err = mlxctl("speak", "-m", str(kokoro_mlx.path), "-o", str(path), *args, "Yes.")
    assert code == 0, err
    samples, got_rate, got_container = read_encoded(path.read_bytes())
    assert (got_container, got_rate) == (container, rate)
    assert 0.2 < samples.size / rate < 3.0 and rms(samples) > 0.01


@needs_espeak
def test_stdout_gets_the_encoded_stream(kokoro_mlx):
    code, out, err = mlxctl("speak", "-m", str(kokoro_mlx.path), "--format", "mp3", "-", stdin="No.",
                            stdout=_BinaryOut())
    assert code == 0, err
    data = out.buffer.getvalue()
    assert data[:4] != b"RIFF"
    samples, rate, container = read_encoded(data)
    assert (container, rate) == ("mp3", 24000) and 0.2 < samples.size / rate < 3.0
