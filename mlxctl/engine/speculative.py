"""Speculative decoding: draft tokens proposed cheaply, checked in one forward pass.

Prompt lookup (``ngram``): the draft is what followed the latest earlier occurrence of the
request's last few tokens, in its prompt or its own output. Agents and code edits repeat large
parts of what they were given, and on a GPU (or a Mac, bandwidth-bound) a pass over a few tokens
costs about what a pass over one does, so every accepted draft token is nearly free.

Exact: each checked position is sampled by the request's own ``TokenSampler``, as a plain decode
step samples it (the grammar-free processing, bias, penalties, temperature and filters, its key
split once per position), and a draft token is accepted when the sampled token equals it. The
first position whose sample differs gives the token that follows; nothing after it is drawn (the
sampler's state goes back to that position). For a proposer that is a deterministic function of
the tokens so far this is the standard rule (accept draft ``x`` with probability ``p(x)``, else
draw from ``p`` without ``x``), so every token comes from the distribution plain decoding draws
it from; a greedy or seeded request emits the very tokens it would without speculation.

Where it runs (this release): a decode batch of one request, with plain (trimmable) KV caches,
no structured-output grammar and no images; anything else decodes as before. Each speculative
step waits for its tokens before the next is queued (the draft depends on them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlxctl.errors import BadInputError

MODES = ("off", "ngram")
DEFAULT_DRAFT_TOKENS = 8
MAX_DRAFT_TOKENS = 64
NGRAM_MAX = 4  # the longest suffix looked up first
NGRAM_MIN = 2  # the shortest one tried before giving up (a single token matches too often)


@dataclass(frozen=True)
class SpeculationConfig:
    """``--speculative`` and ``--num-draft-tokens``."""

    mode: str = "off"
    num_draft_tokens: int = DEFAULT_DRAFT_TOKENS

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise BadInputError(f"unknown speculative mode {self.mode!r}", hint=f"choose one of: {', '.join(MODES)}")
        if not 1 <= self.num_draft_tokens <= MAX_DRAFT_TOKENS:
            raise BadInputError(f"num_draft_tokens must be between 1 and {MAX_DRAFT_TOKENS}, "
                                f"got {self.num_draft_tokens}")

    @property
    def enabled(self) -> bool:
        return self.mode != "off"


@dataclass
class SpeculationStats:
    """Draft tokens checked and accepted (per request, and the engine's totals)."""

    steps: int = 0  # forward passes that checked a draft
    drafted: int = 0
    accepted: int = 0

    def add(self, drafted: int, accepted: int) -> None:
        self.steps += 1
        self.drafted += drafted
        self.accepted += accepted

    def as_dict(self) -> dict:
        rate = self.accepted / self.drafted if self.drafted else 0.0
        return {"steps": self.steps, "draft_tokens": self.drafted, "accepted_tokens": self.accepted,
                "acceptance_rate": round(rate, 4)}


class NgramProposer:
    """Prompt lookup over one request's tokens. Every n-gram (``NGRAM_MIN`` to ``NGRAM_MAX``
    tokens) is indexed once by where it last ended, so a lookup costs the same at any length."""

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self._ends: dict[tuple[int, ...], int] = {}  # n-gram -> end (exclusive) of its latest occurrence
        self._indexed = 0  # n-grams ending at positions up to here are in ``_ends``

    def sync(self, tokens: list[int]) -> None:
        """Catch up with the request's tokens so far (prompt, then output; only appended to)."""
        self.tokens.extend(tokens[len(self.tokens):])

    def propose(self, k: int) -> list[int]:
        """Up to ``k`` tokens that followed the latest earlier occurrence of the longest suffix
        found (``NGRAM_MAX`` tokens down to ``NGRAM_MIN``); [] when none recurs."""
        tokens, end = self.tokens, len(self.tokens)
        # index the n-grams ending before the last position (the suffix itself must not match)
        for stop in range(self._indexed + 1, end):
            for n in range(NGRAM_MIN, min(NGRAM_MAX, stop) + 1):
                self._ends[tuple(tokens[stop - n:stop])] = stop
        self._indexed = max(self._indexed, end - 1)
        for n in range(min(NGRAM_MAX, end), NGRAM_MIN - 1, -1):
            found = self._ends.get(tuple(tokens[end - n:]))
            if found is not None:
                return tokens[found:found + k]
        return []


def accept(sampler: Any, logits: Any, drafts: list[int]) -> tuple[list[int], list[Any]]:
    """Check ``drafts`` against (d+1, V) ``logits`` (position j predicts draft j; the last one
    the token after a fully accepted draft). Returns the tokens to emit (the accepted drafts and
    the token sampled after them) and each one's logprob data (None without logprobs)."""
    import mlx.core as mx

    if sampler.is_plain_greedy:
        chosen = mx.argmax(logits, axis=-1).tolist()
        return _accepted(chosen, drafts), [None] * (len(drafts) + 1)
    outs, states = [], []
    for j in range(len(drafts) + 1):
        outs.append(sampler.sample(logits[j]))
        states.append(sampler.snapshot())
    mx.eval([o.token for o in outs], [o.logprobs.arrays() for o in outs if o.logprobs is not None],
            [a for a in states[-1] if a is not None])
    tokens = _accepted([int(o.token.item()) for o in outs], drafts)
    sampler.restore(states[len(tokens) - 1])  # as if only the emitted positions were drawn
    return tokens, [o.logprobs for o in outs[:len(tokens)]]


def _accepted(chosen: list[int], drafts: list[int]) -> list[int]:
    n = 0
    while n < len(drafts) and chosen[n] == drafts[n]:
        n += 1
    return chosen[:n + 1]
