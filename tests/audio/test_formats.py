"""Text, SRT and WebVTT output of segments."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from mlxctl.audio import formats


@dataclass
class Seg:
    start: float
    end: float
    text: str
    id: int = 0


@pytest.mark.parametrize("seconds, srt, vtt", [
    (0.0, "00:00:00,000", "00:00:00.000"),
    (2.72, "00:00:02,720", "00:00:02.720"),
    (59.9996, "00:01:00,000", "00:01:00.000"),  # rounds to the millisecond, carrying over
    (3661.5, "01:01:01,500", "01:01:01.500"),
    (-0.01, "00:00:00,000", "00:00:00.000"),
    (36000.0, "10:00:00,000", "10:00:00.000"),
])
def test_timestamps(seconds, srt, vtt):
    assert formats.timestamp(seconds, ",") == srt
    assert formats.timestamp(seconds) == vtt


SEGMENTS = [Seg(0.0, 2.5, " Hello world."), Seg(2.5, 2.5, " "), Seg(2.5, 4.04, " This is\na <test> & more.")]


def test_srt_numbers_cues_from_one_and_skips_empty_ones():
    assert formats.srt(SEGMENTS) == (
        "1\n00:00:00,000 --> 00:00:02,500\nHello world.\n\n"
        "2\n00:00:02,500 --> 00:00:04,040\nThis is a <test> & more.\n\n"
    )


def test_vtt_has_its_header_and_escapes_markup():
    assert formats.vtt(SEGMENTS) == (
        "WEBVTT\n\n"
        "00:00:00.000 --> 00:00:02.500\nHello world.\n\n"
        "00:00:02.500 --> 00:00:04.040\nThis is a &lt;test&gt; &amp; more.\n\n"
    )
    assert formats.vtt([]) == "WEBVTT\n\n"


def test_cues_one_at_a_time_match_the_whole():
    spoken = formats.spoken(SEGMENTS)
    assert "".join(formats.srt_cue(i, s) for i, s in enumerate(spoken, 1)) == formats.srt(SEGMENTS)
    assert formats.VTT_HEADER + "".join(formats.vtt_cue(s) for s in spoken) == formats.vtt(SEGMENTS)


def test_joined_text_and_json():
    assert formats.joined_text(SEGMENTS) == "Hello world.  This is\na <test> & more."
    assert formats.segment_json(Seg(0.12345, 1.0, " Hi", id=3)) == {"id": 3, "start": 0.123, "end": 1.0, "text": " Hi"}
