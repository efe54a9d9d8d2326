"""Engine logprobs -> OpenAI's two shapes: chat ``logprobs.content[]`` and the legacy
completions object (``tokens``, ``token_logprobs``, ``top_logprobs``, ``text_offset``).

A token's ``bytes`` are its exact bytes: for byte-level BPE (GPT-2 style) tokenizers they come
from the token's piece, so a token holding half of a UTF-8 character reports that half (its
``token`` text then shows U+FFFD, as OpenAI's does).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from mlxctl.engine.events import TokenLogprob


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """The inverse of GPT-2's bytes_to_unicode table (piece character -> byte)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = dict.fromkeys(printable), 0
    for b in range(256):
        if b not in chars:
            chars[b], extra = 256 + extra, extra + 1
    return {chr(b if c is None else c): b for b, c in chars.items()}


class TokenBytes:
    """Token id -> bytes and text, with the tokenizer's own pieces where they are byte-level."""

    def __init__(self, tokenizer: Any):
        from mlx_lm.tokenizer_utils import BPEStreamingDetokenizer

        self._tokenizer = tokenizer
        self._byte_level = isinstance(tokenizer.detokenizer, BPEStreamingDetokenizer)

    def bytes(self, token_id: int) -> bytes:
        if self._byte_level:
            piece = self._tokenizer.convert_ids_to_tokens(token_id)
            table = _byte_decoder()
            if piece and all(ch in table for ch in piece):
                return bytes(table[ch] for ch in piece)
        return self._tokenizer.decode([token_id]).encode()

    def text(self, token_id: int) -> str:
        return self.bytes(token_id).decode("utf-8", errors="replace")


def chat_logprobs(tokens: TokenBytes, logprobs: Sequence[TokenLogprob] | None) -> dict | None:
    if logprobs is None:
        return None
    return {"content": [_chat_entry(tokens, lp) for lp in logprobs], "refusal": None}


def _chat_entry(tokens: TokenBytes, lp: TokenLogprob) -> dict:
    top = [_chat_top(tokens, t.token_id, t.logprob) for t in lp.top]
    return {**_chat_top(tokens, lp.token_id, lp.logprob), "top_logprobs": top}


def _chat_top(tokens: TokenBytes, token_id: int, logprob: float) -> dict:
    raw = tokens.bytes(token_id)
    return {"token": raw.decode("utf-8", errors="replace"), "logprob": logprob, "bytes": list(raw)}


def legacy_logprobs(tokens: TokenBytes, logprobs: Sequence[TokenLogprob] | None, offset: int) -> dict | None:
    """The completions shape; ``offset`` is where the first token starts in the choice's text."""
    if logprobs is None:
        return None
    texts = [tokens.text(lp.token_id) for lp in logprobs]
    return {
        "tokens": texts,
        "token_logprobs": [lp.logprob for lp in logprobs],
        "top_logprobs": [{tokens.text(t.token_id): t.logprob for t in lp.top} for lp in logprobs],
        "text_offset": _offsets(texts, offset),
    }


def _offsets(texts: list[str], start: int) -> list[int]:
    offsets = []
    for text in texts:
        offsets.append(start)
        start += len(text)
    return offsets
