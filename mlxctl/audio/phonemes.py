"""Text to Kokoro's phonemes through espeak-ng, in chunks a sentence or so long.

Kokoro reads phonemes, not letters: the symbols of misaki, the G2P it was trained with (IPA,
plus ``A I O W Y`` for the diphthongs eɪ aɪ oʊ aʊ ɔɪ, ``ʤ ʧ`` for the affricates and ``ᵊ``
for a syllabic consonant's schwa). mlx-audio's own English front end needs a spaCy model that
no package index here has, so the IPA comes from ``espeak-ng -q --ipa=2 -v en-us`` (Debian
package ``espeak-ng``; ``--ipa=2`` ties diphthongs and affricates with U+0361, which keeps them
apart from two vowels that merely meet) and :func:`to_kokoro` maps it onto that set for
American English: no length marks, ``ɜ`` with its ``ɹ``, ``ɚ`` as ``əɹ``, ``ɐ`` as ``ə``.

espeak-ng drops punctuation, which Kokoro uses for pauses and intonation, so the text is cut
at punctuation first: each clause is phonemised alone and its punctuation put back after it.
:func:`chunks` then groups clauses into sentences (at most :data:`MAX_PHONEMES` symbols, the
model's limit being 510), the units synthesis streams out.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

from mlxctl.errors import BadInputError, UnavailableError

MAX_PHONEMES = 400  # per chunk; Kokoro takes at most 510 (its voice packs have 510 rows)
ESPEAK_VOICE = "en-us"
# punctuation Kokoro knows, when it ends a clause (followed by space, a closing quote or the end)
_CLAUSE_END = re.compile(r"(—|…|[.,;:!?]+(?=[\s\"'”’)\]]|$))")
_SENTENCE_END = set(".!?…")
_TIED = {"d͡ʒ": "ʤ", "t͡ʃ": "ʧ", "e͡ɪ": "A", "a͡ɪ": "I", "o͡ʊ": "O", "ə͡ʊ": "O", "a͡ʊ": "W", "ɔ͡ɪ": "Y", "ə͡l": "ᵊl"}
_REPLACE = (
    ("ɜːɹ", "ɜɹ"), ("ɜː", "ɜɹ"), ("ɝ", "ɜɹ"), ("ɚ", "əɹ"), ("ɐ", "ə"), ("oː", "ɔ"), ("ː", ""), ("ˑ", ""),
    ("r", "ɹ"), ("g", "ɡ"), ("ɫ", "l"), ("ɬ", "l"),
)
_SYLLABIC = re.compile("(.)\u0329")  # n̩ → ᵊn
_TIE = "\u0361"
_JOINERS = ("\u200d", "\u035c", "_")


@dataclass(frozen=True)
class Chunk:
    """A piece of the text and its phonemes, synthesised in one go."""

    text: str
    phonemes: str


def find_espeak() -> str:
    """The espeak-ng program; missing is an :class:`UnavailableError` (exit status 6)."""
    found = shutil.which("espeak-ng") or shutil.which("espeak")
    if found is None:
        raise UnavailableError("espeak-ng is not installed: speech needs it to turn text into phonemes",
                               hint="install it (Debian/Ubuntu: apt-get install espeak-ng; macOS: brew install espeak-ng)")
    return found


def espeak_ipa(text: str, espeak: str | None = None, voice: str = ESPEAK_VOICE) -> str:
    """espeak-ng's IPA for ``text`` (one line; diphthongs and affricates tied with U+0361)."""
    espeak = espeak or find_espeak()
    try:
        done = subprocess.run([espeak, "-q", "-b", "1", "--ipa=2", "-v", voice], input=text.encode("utf-8"),
                              capture_output=True, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UnavailableError(f"espeak-ng did not run: {exc}") from None
    if done.returncode != 0:
        reason = done.stderr.decode(errors="replace").strip().splitlines()
        raise UnavailableError(f"espeak-ng failed: {reason[-1] if reason else f'exit status {done.returncode}'}")
    return " ".join(done.stdout.decode("utf-8", errors="replace").split())


def to_kokoro(ipa: str) -> str:
    """espeak-ng's American English IPA in Kokoro's (misaki's) symbols."""
    text = ipa
    for tied, symbol in _TIED.items():
        text = text.replace(tied, symbol)
    text = text.replace(_TIE, "")
    for joiner in _JOINERS:
        text = text.replace(joiner, "")
    text = _SYLLABIC.sub(lambda m: "ᵊ" + m.group(1), text)
    for old, new in _REPLACE:
        text = text.replace(old, new)
    return " ".join(text.split())


def clauses(text: str) -> Iterator[tuple[str, str]]:
    """(words, punctuation after them) for each clause of ``text``; a line break ends a sentence."""
    for line in re.split(r"\s*\n\s*", text.strip()):
        parts = _CLAUSE_END.split(line)
        for i in range(0, len(parts), 2):
            words = parts[i].strip()
            punct = parts[i + 1] if i + 1 < len(parts) else ""
            if words or punct:
                yield words, punct
        yield "", "\n"


def _punctuation(punct: str, vocab: dict[str, int]) -> str:
    """A clause's punctuation as Kokoro writes it ("..." is "…"; unknown marks dropped)."""
    punct = punct.replace("...", "…")
    return "".join(ch for ch in punct if ch in vocab)


def phonemize(text: str, vocab: dict[str, int], espeak: str | None = None) -> list[Chunk]:
    """``text`` as Kokoro phonemes, in chunks of whole sentences where they fit.

    Symbols outside ``vocab`` are dropped. Empty text, or text with nothing to say, is bad input.
    """
    if not text.strip():
        raise BadInputError("there is no text to speak")
    espeak = espeak or find_espeak()
    pieces: list[tuple[str, str, bool]] = []  # (text, phonemes, ends a sentence)
    for words, punct in clauses(text):
        if punct == "\n":
            if pieces:
                pieces[-1] = (pieces[-1][0], pieces[-1][1], True)
            continue
        said = _keep(to_kokoro(espeak_ipa(words, espeak)), vocab) if words else ""
        mark = _punctuation(punct, vocab)
        if not said and not mark:
            continue
        phonemes = (said + mark).strip()
        ends = bool(set(punct) & _SENTENCE_END)
        split = _split_long(f"{words}{punct}", phonemes)
        pieces.extend((w, p, ends and i == len(split) - 1) for i, (w, p) in enumerate(split))
    chunks = _group(pieces)
    if not any(_spoken(c.phonemes) for c in chunks):
        raise BadInputError("the text has nothing to speak", hint="give words, not only punctuation")
    return chunks


def _keep(phonemes: str, vocab: dict[str, int]) -> str:
    return " ".join("".join(ch for ch in phonemes if ch in vocab or ch == " ").split())


def _spoken(phonemes: str) -> bool:
    return any(ch.isalpha() for ch in phonemes)


def _split_long(text: str, phonemes: str) -> list[tuple[str, str]]:
    """A clause longer than a chunk, cut at word boundaries (the text goes with the first piece)."""
    if len(phonemes) <= MAX_PHONEMES:
        return [(text, phonemes)]
    out, current = [], ""
    for word in phonemes.split(" "):
        while len(word) > MAX_PHONEMES:  # one enormous "word": cut it anywhere
            if current:
                out.append(current)
                current = ""
            out.append(word[:MAX_PHONEMES])
            word = word[MAX_PHONEMES:]
        if current and len(current) + 1 + len(word) > MAX_PHONEMES:
            out.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    if current:
        out.append(current)
    return [(text if i == 0 else "", piece) for i, piece in enumerate(out)]


def _group(pieces: list[tuple[str, str, bool]]) -> list[Chunk]:
    """Clauses joined into chunks: a chunk ends with a sentence or before it would grow too long."""
    chunks: list[Chunk] = []
    text, phonemes = "", ""
    for words, said, ends in pieces:
        if phonemes and len(phonemes) + 1 + len(said) > MAX_PHONEMES:
            chunks.append(Chunk(text.strip(), phonemes))
            text, phonemes = "", ""
        text = f"{text} {words}" if words else text
        phonemes = f"{phonemes} {said}" if phonemes else said
        if ends:
            chunks.append(Chunk(text.strip(), phonemes))
            text, phonemes = "", ""
    if phonemes:
        chunks.append(Chunk(text.strip(), phonemes))
    return [c for c in chunks if c.phonemes]
