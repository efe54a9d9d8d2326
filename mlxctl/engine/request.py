"""Request: one generation's state as the engine tracks it."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import Any

from mlxctl.engine.events import Timings, Usage
from mlxctl.engine.sampling import SamplingParams
from mlxctl.engine.speculative import SpeculationStats
from mlxctl.engine.streams import RequestStream


class RequestStatus(enum.Enum):
    WAITING = "waiting"  # queued, nothing computed
    PREFILLING = "prefilling"  # prompt being processed in chunks
    RUNNING = "running"  # in the decode batch
    FINISHED = "finished"


@dataclass(eq=False)
class Request:
    id: str
    prompt_tokens: list[int]
    params: SamplingParams
    stream: RequestStream
    max_new_tokens: int  # max_tokens capped by the context left after the prompt
    status: RequestStatus = RequestStatus.WAITING
    num_prefilled: int = 0
    num_reused: int = 0  # of those, how many this attempt took from the prefix cache (not yet run itself)
    num_generated: int = 0
    cache: list[Any] | None = None  # per-layer KV cache while prefilling alone
    sampler: Any = None  # TokenSampler, made on the engine thread
    constraint: Any = None  # constraints.Matcher for structured output, made at submit
    output: Any = None  # OutputProcessor, made on the engine thread
    arrival: float = field(default_factory=time.perf_counter)
    prefill_start: float | None = None
    first_token: float | None = None
    first_sampled: float | None = None
    finished_at: float | None = None
    aborted: bool = False
    generated: list[int] = field(default_factory=list)  # token ids emitted so far
    cached_tokens: int = 0  # prompt tokens served from the prefix cache
    prefix_blocks: tuple = ()  # prefix-cache blocks this request holds a reference on
    cache_salt: str = ""  # keys what the tokens do not show (media, tenant): see engine/kv/media.py
    resume: list[int] | None = None  # checkpoint to re-prefill after a preemption
    images: tuple = ()  # vision.images.ImageInput, in prompt order (prefilled from input embeddings)
    image_spans: tuple = ()  # (start, length) of each image's placeholder positions in the prompt
    image_features: list | None = None  # per image, once encoded on the engine thread (None: not needed)
    attempts: int = 0  # failed engine steps this request was part of
    checkpoint_at: list[int] = field(default_factory=list)  # prompt positions to checkpoint at (engine/checkpoints.py)
    proposer: Any = None  # speculative.NgramProposer, made at its first speculative step
    speculation: SpeculationStats = field(default_factory=SpeculationStats)  # its drafts, checked and accepted
    group: Any = None  # what it was submitted with (an HTTP request's n choices): see engine/memory.py

    @property
    def prompt_len(self) -> int:
        return len(self.prompt_tokens)

    @property
    def reserve(self) -> int:
        """The positions its KV may reach: the prompt and every token it may generate."""
        return len(self.prompt_tokens) + self.max_new_tokens

    @property
    def prefill_tokens(self) -> list[int]:
        """What prefill runs: the prompt, or after a preemption the checkpoint (prompt plus the
        tokens already emitted), so generation resumes where the client's stream stands."""
        return self.prompt_tokens if self.resume is None else self.resume

    @property
    def prefill_len(self) -> int:
        return len(self.prefill_tokens)

    @property
    def prompt_left(self) -> int:
        return self.prefill_len - self.num_prefilled

    @property
    def is_finished(self) -> bool:
        return self.status is RequestStatus.FINISHED

    def usage(self) -> Usage:
        return Usage(prompt_tokens=self.prompt_len, completion_tokens=self.num_generated,
                     cached_tokens=self.cached_tokens)

    def timings(self) -> Timings:
        end = self.finished_at or time.perf_counter()
        start = self.prefill_start or end
        sampled = self.first_sampled or end
        first = self.first_token or end
        return Timings(
            queue_s=start - self.arrival,
            ttft_s=first - self.arrival,
            prefill_s=sampled - start,
            decode_s=end - first,
            e2e_s=end - self.arrival,
            prompt_tokens=self.prompt_len,
            completion_tokens=self.num_generated,
            draft_tokens=self.speculation.drafted,
            accepted_tokens=self.speculation.accepted,
        )

    def progress(self) -> dict:
        """A snapshot for status views."""
        return {
            "id": self.id,
            "status": self.status.value,
            "prompt_tokens": self.prompt_len,
            "prompt_done": self.num_prefilled,
            "generated": self.num_generated,
            "cached_tokens": self.cached_tokens,
            "max_new_tokens": self.max_new_tokens,
        }


