"""What a request's stream carries: token events, then one finish event."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class FinishReason(str, enum.Enum):
    STOP = "stop"  # EOS, a stop token id or a stop string
    LENGTH = "length"  # max_tokens reached, or the context is full
    ABORT = "abort"  # the caller aborted (disconnect, Ctrl-C, timeout)
    ERROR = "error"  # the engine failed while serving this request


@dataclass(frozen=True)
class TopLogprob:
    token_id: int
    logprob: float


@dataclass(frozen=True)
class TokenLogprob:
    """Log-probability of one generated token and its top alternatives."""

    token_id: int
    logprob: float
    top: tuple[TopLogprob, ...] = ()


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class Timings:
    """Seconds, measured on the engine thread with time.perf_counter()."""

    queue_s: float  # arrival -> first prefill chunk
    ttft_s: float  # arrival -> first token emitted
    prefill_s: float  # first prefill chunk -> first token sampled
    decode_s: float  # first token -> finish
    e2e_s: float  # arrival -> finish
    prompt_tokens: int = 0
    completion_tokens: int = 0
    draft_tokens: int = 0  # speculative decoding: draft tokens checked
    accepted_tokens: int = 0  # and of those, accepted

    @property
    def prefill_tps(self) -> float:
        return self.prompt_tokens / self.prefill_s if self.prefill_s > 0 else 0.0

    @property
    def decode_tps(self) -> float:
        n = self.completion_tokens - 1
        return n / self.decode_s if self.decode_s > 0 and n > 0 else 0.0


@dataclass(frozen=True)
class TokenEvent:
    """New text (possibly empty while a UTF-8 sequence or stop string is held back)."""

    text: str
    token_ids: tuple[int, ...]
    logprobs: tuple[TokenLogprob, ...] | None = None


@dataclass(frozen=True)
class FinishEvent:
    """The last event of every stream. ``text`` is any text released at the end."""

    reason: FinishReason
    usage: Usage
    timings: Timings
    text: str = ""
    error: BaseException | None = field(default=None, compare=False)
    stop_string: str | None = None  # which stop string ended it (reason STOP), if one did


Event = TokenEvent | FinishEvent
