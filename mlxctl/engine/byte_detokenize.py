"""Incremental detokenization from a byte table, for byte-level BPE tokenizers.

GPT-2-style byte-level BPE (Llama 3, Qwen, SmolLM2, Mistral's Tekken, gpt-oss...) spells every
token as bytes, one printable character per byte. Decoding a sequence is joining its tokens'
bytes and reading them as UTF-8 (invalid bytes as U+FFFD), so each token's bytes are worked out
once per tokenizer and a request's text grows by one table lookup and an incremental UTF-8 decode
per token. The generic path (engine.detokenize.IncrementalDetokenizer) calls the tokenizer's
``decode`` twice per token: about 10 us through mlx-lm's wrapper on our CPU against 1.4 us here
(scripts/bench_detok.py), 0.6 ms a step at 64 streams on the thread that also launches the
device's work.

:func:`byte_table` says None for any tokenizer it cannot prove is plain byte-level (another
decoder, clean-up of tokenization spaces, a vocabulary it cannot read); those keep the generic
path.
"""

from __future__ import annotations

import codecs
import json
import weakref
from typing import Any

_TABLES: "weakref.WeakKeyDictionary[Any, tuple | None]" = weakref.WeakKeyDictionary()


def _byte_of_char() -> dict[str, int]:
    """GPT-2's reversible byte <-> printable character map, character -> byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            chars[chr(byte)] = byte
        else:
            chars[chr(256 + extra)] = byte
            extra += 1
    return chars


def _backend(tokenizer: Any) -> Any:
    hf = tokenizer  # an HF tokenizer, or mlx-lm's TokenizerWrapper of one
    if not hasattr(hf, "backend_tokenizer"):
        hf = getattr(hf, "_tokenizer", hf)
    if getattr(hf, "clean_up_tokenization_spaces", False):
        return None  # decode rewrites " ." and the like: not a plain join of bytes
    return getattr(hf, "backend_tokenizer", None)


def byte_table(tokenizer: Any) -> tuple[list[bytes | None], list[bytes | None]] | None:
    """(bytes of each id, bytes of each id with special tokens skipped), or None when the
    tokenizer is not plain byte-level BPE. Built once per tokenizer."""
    try:
        return _TABLES[tokenizer]
    except (KeyError, TypeError):
        pass
    table = _build(tokenizer)
    try:
        _TABLES[tokenizer] = table
    except TypeError:  # not weak-referenceable: built again next time
        pass
    return table


def _build(tokenizer: Any) -> tuple[list[bytes | None], list[bytes | None]] | None:
    backend = _backend(tokenizer)
    if backend is None or not hasattr(backend, "to_str"):
        return None
    spec = json.loads(backend.to_str())
    decoder, model = spec.get("decoder") or {}, spec.get("model") or {}
    if decoder.get("type") != "ByteLevel" or model.get("type") != "BPE" or not isinstance(model.get("vocab"), dict):
        return None
    chars = _byte_of_char()
    added = {t["id"]: t for t in spec.get("added_tokens") or ()}
    size = max([*model["vocab"].values(), *added, -1]) + 1
    plain: list[bytes | None] = [None] * size
    for piece, token_id in model["vocab"].items():
        if any(c not in chars for c in piece):
            return None  # not a byte-level vocabulary after all
        plain[token_id] = bytes(chars[c] for c in piece)
    skipped = list(plain)
    for token_id, token in added.items():
        plain[token_id] = token["content"].encode()
        skipped[token_id] = b"" if token.get("special") else plain[token_id]
    return plain, skipped


class ByteDetokenizer:
    """The interface of IncrementalDetokenizer over a byte table: :meth:`add` returns the text
    an id completes ('' while a character is unfinished), :meth:`flush` what is held back (an
    unfinished character as U+FFFD). An id outside the table decodes through the tokenizer."""

    def __init__(self, tokenizer: Any, table: list[bytes | None]):
        self._tokenizer = tokenizer
        self._table = table
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pieces: list[str] = []

    @property
    def text(self) -> str:
        return "".join(self._pieces)

    def add(self, token_id: int) -> str:
        raw = self._table[token_id] if 0 <= token_id < len(self._table) else None
        if raw is None:
            raw = self._tokenizer.decode([token_id]).encode()
        return self._emit(self._utf8.decode(raw))

    def flush(self) -> str:
        return self._emit(self._utf8.decode(b"", final=True))

    def _emit(self, text: str) -> str:
        if text:
            self._pieces.append(text)
        return text
