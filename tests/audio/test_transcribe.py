"""Transcription with the real tiny.en: words, segments, options; the window splitter's rules."""

from __future__ import annotations

import pytest

from mlxctl.audio.decode import read_audio_file
from mlxctl.audio.transcribe import Transcription, language_code
from mlxctl.errors import BadInputError

BEGIN = 1000  # the toy tokenizer's first timestamp id


class _Tokenizer:
    timestamp_begin = BEGIN


def split(tokens, size=3000):
    """Transcription._split without a model: (pieces as (start, end, tokens), frames to advance)."""
    run = Transcription.__new__(Transcription)
    run.tokenizer = _Tokenizer()
    return run._split(tokens, size, 0.02, 2)


def ts(seconds: float) -> int:
    return BEGIN + round(seconds / 0.02)


def test_split_cuts_at_timestamp_pairs_and_moves_to_the_last_one():
    tokens = [ts(0), 1, 2, ts(1.5), ts(1.5), 3, ts(4.0), ts(4.2), 4, 5]  # the last piece is unfinished
    pieces, advance = split(tokens)
    assert [(p[0], p[1]) for p in pieces] == [(0.0, 1.5), (1.5, 4.0)]
    assert pieces[1][2] == [ts(1.5), 3, ts(4.0)]
    assert advance == 400  # 4.0 s = 200 timestamp steps of 2 mel frames


def test_split_ending_on_a_lone_timestamp_takes_the_whole_window():
    pieces, advance = split([ts(0), 1, ts(1.0), ts(1.0), 2, ts(2.5)], size=2500)
    assert [(p[0], p[1]) for p in pieces] == [(0.0, 1.0), (1.0, 2.5)]
    assert advance == 2500


def test_split_without_pairs_is_one_segment():
    assert split([ts(0), 1, 2, ts(2.0)], size=3000) == ([(0.0, 2.0, [ts(0), 1, 2, ts(2.0)])], 3000)
    assert split([1, 2], size=1200) == ([(0.0, 12.0, [1, 2])], 1200)  # no timestamps: the window's length


def test_split_never_stalls():
    _pieces, advance = split([ts(0), ts(0), 1, 2], size=3000)
    assert advance == 3000


def test_language_codes():
    assert language_code("en") == "en" and language_code("English") == "en" and language_code(" german ") == "de"
    assert language_code(None) is None and language_code("") is None
    with pytest.raises(BadInputError, match="unknown language"):
        language_code("klingon")


def test_tiny_en_transcribes_speech(tiny_model, speech):
    run = tiny_model.transcribe(read_audio_file(speech.path))
    segments = list(run)
    assert run.language == "en" and run.segments == segments
    assert segments or not speech.spoken  # a tone (no espeak-ng) is no speech
    assert all(0.0 <= s.start < s.end <= run.duration + 0.5 for s in segments)
    assert [s.id for s in segments] == list(range(len(segments)))
    speech.check(run.text)


def test_english_only_model_refuses_other_languages(tiny_model):
    import numpy as np

    with pytest.raises(BadInputError, match="English only"):
        tiny_model.transcribe(np.zeros(16000, dtype=np.float32), language="fr")
    with pytest.raises(BadInputError, match="between 0 and 1"):
        tiny_model.transcribe(np.zeros(16000, dtype=np.float32), temperature=1.5)


@pytest.mark.slow
def test_matches_mlx_audio_generate_and_gives_word_times(tiny_model, speech):
    """Our window loop agrees with mlx-audio's generate(); word timestamps come from its DTW."""
    speech.need_speech()
    audio = read_audio_file(speech.path)
    reference = tiny_model.model.generate(audio, fp16=False)
    run = tiny_model.transcribe(audio, word_timestamps=True)
    list(run)
    assert run.text == reference.text.strip()
    words = [w for s in run.segments for w in s.words]
    assert words and all(w["start"] <= w["end"] for w in words)
    if speech.spoken:
        assert any("hello" in w["word"].lower() for w in words)


@pytest.mark.slow
def test_long_audio_is_cut_into_windows(tiny_model, speech):
    """Speech, 31 s of silence, speech: two windows, the second one's segments after 30 s."""
    import numpy as np

    speech.need_speech()

    clip = read_audio_file(speech.path)
    audio = np.concatenate([clip, np.zeros(31 * 16000, dtype=np.float32), clip])
    run = tiny_model.transcribe(audio)
    seen = list(run)  # yielded window by window
    assert seen == run.segments and len({s.seek for s in seen}) >= 2
    assert [s.start for s in seen] == sorted(s.start for s in seen)
    assert seen[0].start < 3.0 and seen[-1].start >= 30.0
    speech.check(" ".join(s.text for s in seen if s.start < 30))
    speech.check(" ".join(s.text for s in seen if s.start >= 30))


@pytest.mark.slow
def test_whisper_base_is_multilingual(model_home, speech, tmp_path):
    """The bigger catalog model (two joined wheel parts): detects English, takes other languages."""
    import shutil
    import subprocess

    from mlxctl.audio.models import resolve_stt
    from mlxctl.audio.transcribe import load_whisper
    from mlxctl.models.store import ModelStore

    speech.need_speech()
    folder = resolve_stt("whisper-base", store=ModelStore(model_home))
    whisper = load_whisper(folder.path, folder.name)
    assert whisper.multilingual
    run = whisper.transcribe(read_audio_file(speech.path))
    list(run)
    assert run.language == "en"
    speech.check(run.text)
    if speech.spoken and shutil.which("espeak-ng"):
        german = tmp_path / "de.wav"
        # A sentence whisper-base decodes greedily (avg logprob about -0.5): espeak's "Hallo Welt, das
        # ist ein Test" fell below Whisper's -1.0 threshold, into the random temperature fallback.
        subprocess.run(["espeak-ng", "-v", "de", "-s", "130", "-w", str(german),
                        "Guten Morgen. Wie geht es dir heute? Das Wetter ist schön."], check=True, timeout=60)
        run = whisper.transcribe(read_audio_file(german), language="de")
        list(run)
        assert run.language == "de" and "guten morgen" in run.text.lower(), run.text
