"""Text to Kokoro phonemes: the IPA mapping, clause and sentence chunking, and espeak-ng itself."""

from __future__ import annotations

import json
import shutil

import pytest

from mlxctl.audio import phonemes
from mlxctl.audio.phonemes import Chunk, clauses, phonemize, to_kokoro
from mlxctl.errors import BadInputError, ExitStatus, UnavailableError

VOCAB = {s: i for i, s in enumerate(";:,.!?—…\"()“” ʤʧᵊAIOWYabdefhijklmnopstuvwzɑɐæðəɚɛɜɡɪŋɔɹɾʃʊʌʒʔθˈˌᵻ", start=1)}
needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng")


@pytest.mark.parametrize("ipa, kokoro", [
    ("həlˈo͡ʊ wˈɜːld", "həlˈO wˈɜɹld"),  # diphthong, long ɜ with its r
    ("d͡ʒˈʌmps ˌo͡ʊvɚ", "ʤˈʌmps ˌOvəɹ"),  # affricate, r-coloured schwa
    ("bˈɔ͡ɪ ma͡ɪ hˈa͡ʊs", "bˈY mI hˈWs"),
    ("t͡ʃˈɜːt͡ʃ lˈe͡ɪt", "ʧˈɜɹʧ lˈAt"),
    ("bˈʌʔn̩ lˈɪɾə͡l", "bˈʌʔᵊn lˈɪɾᵊl"),  # syllabic n and l
    ("kˈɑː͡ɹ mˈoːɹ ɐbˈa͡ʊt", "kˈɑɹ mˈɔɹ əbˈWt"),
])
def test_espeak_ipa_maps_onto_kokoros_symbols(ipa, kokoro):
    assert to_kokoro(ipa) == kokoro


def test_clauses_keep_their_punctuation_and_lines_end_sentences():
    got = list(clauses("Hello, world! It costs 3.5 dollars... Really?\nNew line"))
    assert got == [("Hello", ","), ("world", "!"), ("It costs 3.5 dollars", "..."), ("Really", "?"), ("", "\n"),
                   ("New line", ""), ("", "\n")]


def _fake_espeak(monkeypatch):
    """espeak-ng's stand-in: every word becomes 'tˈɛst' (so lengths are easy to count)."""
    monkeypatch.setattr(phonemes, "espeak_ipa", lambda text, espeak=None, voice="en-us": " ".join(
        "tˈɛst" for _ in text.split()))
    monkeypatch.setattr(phonemes, "find_espeak", lambda: "espeak-ng")


def test_chunks_are_sentences(monkeypatch):
    _fake_espeak(monkeypatch)
    chunks = phonemize("One two, three. Four? Five", VOCAB)
    assert chunks == [Chunk("One two, three.", "tˈɛst tˈɛst, tˈɛst."), Chunk("Four?", "tˈɛst?"),
                      Chunk("Five", "tˈɛst")]


def test_long_sentences_are_cut_under_the_limit(monkeypatch):
    _fake_espeak(monkeypatch)
    text = ", ".join(["word " * 20] * 10) + "."  # one sentence, 200 words, 1200 phonemes
    chunks = phonemize(text, VOCAB)
    assert len(chunks) >= 3 and all(0 < len(c.phonemes) <= phonemes.MAX_PHONEMES for c in chunks)
    one_word = phonemize("x" * 3000, VOCAB)  # no space to cut at: cut anyway
    assert all(len(c.phonemes) <= phonemes.MAX_PHONEMES for c in one_word)


def test_nothing_to_say_is_bad_input(monkeypatch):
    _fake_espeak(monkeypatch)
    for text in ("", "   \n ", "...", "?!"):
        with pytest.raises(BadInputError):
            phonemize(text, VOCAB)


def test_missing_espeak_is_unavailable(monkeypatch):
    monkeypatch.setattr(phonemes.shutil, "which", lambda name: None)
    with pytest.raises(UnavailableError) as info:
        phonemize("hello", VOCAB)
    assert info.value.exit_status == ExitStatus.UNAVAILABLE and "espeak-ng" in info.value.message


@needs_espeak
def test_real_espeak_phonemes(tmp_path):
    vocab = json.loads(json.dumps(VOCAB))
    chunks = phonemize("Hello world, this is a test. How are you?", vocab)
    assert [c.phonemes for c in chunks] == ["həlˈO wˈɜɹld, ðɪs ɪz ə tˈɛst.", "hˈW ɑɹ ju?"]
    assert [c.text for c in chunks] == ["Hello world, this is a test.", "How are you?"]
    assert phonemize("42", vocab)[0].phonemes == "fˈɔɹɾi tˈu"
