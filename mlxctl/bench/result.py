"""What one request did: timings from the client's side, token counts, text and errors."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RequestResult:
    """One request's outcome; times are seconds from when it was sent."""

    name: str
    max_tokens: int
    sent_at: float = 0.0  # perf_counter when sent
    ok: bool = False
    error_kind: str | None = None  # http_<status>, timeout, connection, stream_error
    error: str | None = None
    chunk_times: list[float] = field(default_factory=list)  # each chunk that carried output
    e2e: float | None = None
    text: str = ""
    finish_reason: str | None = None
    prompt_tokens: int | None = None  # from the server's usage
    completion_tokens: int | None = None
    ignore_eos_sent: bool = False
    check_failures: list[str] | None = None  # None: no checks; [] passed

    @property
    def ttft(self) -> float | None:
        return self.chunk_times[0] if self.chunk_times else None

    @property
    def output_tokens(self) -> int:
        """The server's completion_tokens, else one per output chunk."""
        return self.completion_tokens if self.completion_tokens is not None else len(self.chunk_times)

    @property
    def itl(self) -> list[float]:
        """Every gap between output chunks."""
        return [b - a for a, b in zip(self.chunk_times, self.chunk_times[1:])]

    @property
    def tpot(self) -> float | None:
        """Time per output token after the first."""
        if self.e2e is None or self.ttft is None or self.output_tokens < 2:
            return None
        return (self.e2e - self.ttft) / (self.output_tokens - 1)

    @property
    def passed_checks(self) -> bool:
        return self.ok and not self.check_failures

    def fail(self, kind: str, message: str) -> RequestResult:
        self.ok, self.error_kind, self.error = False, kind, message
        return self
