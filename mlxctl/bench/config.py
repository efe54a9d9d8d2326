"""What one bench-serve invocation measures: typed, validated settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from mlxctl.bench.slo import Slo
from mlxctl.errors import BadInputError

ENDPOINTS = ("chat", "completions")


@dataclass(frozen=True)
class BenchConfig:
    """Every knob of a benchmark; lists are swept as a cross product."""

    urls: tuple[str, ...]
    endpoint: str = "chat"
    models: tuple[str, ...] = ()  # one for every URL, or one per URL; empty: ask each server
    api_key: str | None = None
    prompt_tokens: tuple[int, ...] = (128,)
    output_tokens: tuple[int, ...] = (128,)
    concurrency: tuple[int, ...] = (1,)
    request_rates: tuple[float, ...] = ()  # empty: closed loop at each concurrency
    max_concurrency: int | None = None  # cap in request-rate mode
    num_requests: int | None = None  # per run; None: a default that fits the mode
    warmup: int | None = None  # per shape; None: one per concurrency slot
    repeats: int = 1
    slo: Slo = field(default_factory=Slo)
    ignore_eos: bool = True
    timeout: float = 300.0
    seed: int = 0
    workload: Path | None = None

    def __post_init__(self) -> None:
        if self.endpoint not in ENDPOINTS:
            raise BadInputError(f"bad --endpoint {self.endpoint!r}", hint="use chat or completions")
        if not self.urls:
            raise BadInputError("no --url given")
        if len(self.models) > 1 and len(self.models) != len(self.urls):
            raise BadInputError(f"{len(self.models)} --model names for {len(self.urls)} --url", hint="give one --model for all, or one per --url in the same order")
        _at_least("--repeats", self.repeats, 1)
        _at_least("--timeout", self.timeout, 0.001)
        for name, values in (("--prompt-tokens", self.prompt_tokens), ("--output-tokens", self.output_tokens), ("--concurrency", self.concurrency)):
            for value in values:
                _at_least(name, value, 1)
        for rate in self.request_rates:
            _at_least("--request-rate", rate, 1e-9)

    def model_for(self, url_index: int) -> str | None:
        """The --model for the URL at ``url_index`` (None: the first id the server lists)."""
        if not self.models:
            return None
        return self.models[url_index if len(self.models) > 1 else 0]

    @property
    def rate_mode(self) -> bool:
        return bool(self.request_rates)

    def requests_for(self, concurrency: int) -> int:
        """Requests in one measured run: --num-requests, else 4 per slot (at least 8), 32 by rate."""
        if self.num_requests is not None:
            return self.num_requests
        return 32 if self.rate_mode else max(8, 4 * concurrency)

    def warmup_for(self, concurrency: int) -> int:
        """Warm-up requests before a shape: --warmup, else one per concurrency slot."""
        return self.warmup if self.warmup is not None else concurrency


def _at_least(name: str, value: float, low: float) -> None:
    if value < low:
        raise BadInputError(f"bad {name} {value}: must be at least {low:g}")


def parse_url(text: str) -> str:
    """A server's base URL: http(s)://host[:port][/prefix], without a trailing / or /v1."""
    parts = urlsplit(text.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInputError(f"bad --url {text!r}", hint="give a base URL such as http://127.0.0.1:8080")
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise BadInputError(f"bad --url {text!r}: the port is not a number from 0 to 65535") from None
    base = f"{parts.scheme}://{parts.netloc}{parts.path}".rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def parse_list(name: str, items: list[str] | None, kind: type, default: tuple = ()) -> tuple:
    """Comma-separated and/or repeated values (``1,4,16`` or ``-c 1 -c 4``) as a tuple."""
    if not items:
        return default
    values = []
    for part in (p.strip() for item in items for p in item.split(",")):
        try:
            values.append(kind(part))
        except ValueError:
            raise BadInputError(f"bad {name} value {part!r}: expected {'an integer' if kind is int else 'a number'}") from None
    return tuple(values)
