"""The order of work: shapes swept, each warmed up on every URL, then measured interleaved
(A B A B per repeat) so drift on the machine hits every server alike."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

from mlxctl.bench.config import BenchConfig


@dataclass(frozen=True)
class Shape:
    """One point of the sweep; prompt/output are None for a workload's own cases."""

    prompt_tokens: int | None
    output_tokens: int | None
    concurrency: int | None  # closed-loop slots, or the cap in request-rate mode (None: none)
    request_rate: float | None = None

    def label(self) -> str:
        parts = [] if self.prompt_tokens is None else [f"in={self.prompt_tokens}", f"out={self.output_tokens}"]
        if self.request_rate is not None:
            parts.append(f"rate={self.request_rate:g}/s")
        if self.concurrency is not None:
            parts.append(f"conc={self.concurrency}")
        return " ".join(parts) or "workload"

    def as_dict(self) -> dict:
        return {"prompt_tokens": self.prompt_tokens, "output_tokens": self.output_tokens,
                "concurrency": self.concurrency, "request_rate": self.request_rate}


@dataclass(frozen=True)
class Step:
    """Warm up or measure one shape on one URL (repeat is None for the warm-up)."""

    shape: Shape
    url_index: int
    repeat: int | None

    @property
    def is_warmup(self) -> bool:
        return self.repeat is None


def shapes(config: BenchConfig, workload: bool) -> list[Shape]:
    """The sweep: prompt x output x (concurrency or rate); a workload sweeps only the latter."""
    lengths = [(None, None)] if workload else list(itertools.product(config.prompt_tokens, config.output_tokens))
    if config.rate_mode:
        return [Shape(p, o, config.max_concurrency, rate) for (p, o) in lengths for rate in config.request_rates]
    return [Shape(p, o, c) for (p, o) in lengths for c in config.concurrency]


def steps(shape_list: list[Shape], urls: int, repeats: int) -> Iterator[Step]:
    """Per shape: a warm-up on each URL, then each repeat on each URL in turn."""
    for shape in shape_list:
        yield from (Step(shape, u, None) for u in range(urls))
        for repeat in range(repeats):
            yield from (Step(shape, u, repeat) for u in range(urls))
