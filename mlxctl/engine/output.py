"""Turns each generated token id into text events and decides when a request stops."""

from __future__ import annotations

from typing import Any

from mlxctl.engine.byte_detokenize import ByteDetokenizer, byte_table
from mlxctl.engine.detokenize import IncrementalDetokenizer, StopMatcher
from mlxctl.engine.events import FinishReason, TokenEvent, TokenLogprob
from mlxctl.engine.sampling import SamplingParams


class OutputProcessor:
    """Incremental detokenization plus stop conditions for one request."""

    def __init__(self, tokenizer: Any, params: SamplingParams, eos_token_ids: set[int], max_new_tokens: int,
                 context_ids: list[int] = ()):
        self._detok = make_detokenizer(tokenizer, params.skip_special_tokens, context_ids)
        self._stops = StopMatcher(params.stop)
        stop_ids = set(params.stop_token_ids)
        self._stop_ids = stop_ids if params.ignore_eos else stop_ids | set(eos_token_ids)
        self._max = max_new_tokens
        self._count = 0

    def process(self, token_id: int, logprob: TokenLogprob | None) -> tuple[TokenEvent, FinishReason | None]:
        """Consume one token; return its event and a finish reason when the request is done."""
        self._count += 1
        lps = (logprob,) if logprob is not None else None
        if token_id in self._stop_ids:
            return TokenEvent("", (token_id,), lps), FinishReason.STOP
        text, hit = self._stops.feed(self._detok.add(token_id))
        if hit:
            return TokenEvent(text, (token_id,), lps), FinishReason.STOP
        if self._count >= self._max:
            return TokenEvent(text, (token_id,), lps), FinishReason.LENGTH
        return TokenEvent(text, (token_id,), lps), None

    @property
    def stop_string(self) -> str | None:
        return self._stops.matched

    def flush(self) -> str:
        """Text still held back when the request ends (nothing after a stop string hit)."""
        text, _ = self._stops.feed(self._detok.flush())
        return text + self._stops.flush()


def make_detokenizer(tokenizer: Any, skip_special_tokens: bool, context_ids: list[int] = ()) -> Any:
    """A byte table's detokenizer for byte-level BPE tokenizers, else the generic one (whose
    context ids, the prompt's last, let SentencePiece decoders keep the first token's space)."""
    tables = byte_table(tokenizer)
    if tables is not None:
        return ByteDetokenizer(tokenizer, tables[1] if skip_special_tokens else tables[0])
    return IncrementalDetokenizer(tokenizer, skip_special_tokens=skip_special_tokens, context_ids=context_ids)
