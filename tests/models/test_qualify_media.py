"""`mlxctl model qualify` for the catalog's embedding, speech-to-text and text-to-speech models."""

from __future__ import annotations

import pytest

from mlxctl.cli.model_qualify import _media_kind


def test_catalog_kinds_pick_their_scorecards():
    assert _media_kind("minilm-l6") == "embed"
    assert _media_kind("whisper-tiny-en") == "stt"
    assert _media_kind("kokoro-82m") == "tts"
    assert _media_kind("smollm2-135m") is None and _media_kind("./some/folder") is None


@pytest.mark.slow
@pytest.mark.parametrize("kind, ref, checks", [
    ("embed", "minilm-l6", ["loads", "deterministic", "semantic sense", "speed"]),
    ("stt", "whisper-tiny-en", ["loads", "transcribes speech", "deterministic", "speed"]),
    ("tts", "kokoro-82m", ["loads", "speaks", "speed", "heard back"]),
])
def test_every_catalog_model_gets_an_honest_scorecard(model_home, monkeypatch, kind, ref, checks):
    import shutil

    from mlxctl.models.qualify_media import qualify_kind

    monkeypatch.setenv("MLXCTL_HOME", str(model_home))
    card = qualify_kind(kind, ref)
    assert [c.name for c in card.checks] == checks
    if kind == "stt" and shutil.which("espeak-ng") is None:
        assert card.check("transcribes speech").status == "skip"
    else:
        assert card.passed, [(c.name, c.status, c.detail) for c in card.checks]
