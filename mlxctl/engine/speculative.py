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

Where it runs: decode batches of up to ``max_rows`` requests (one on MLX's CPU backend), on KV
caches that can be cut and on recurrent layers whose state is restored and brought forward over
the kept tokens (engine/speculative_step.py), with or without a structured-output grammar, and
no images; anything else decodes as before (docs/speculative.md). Each speculative step waits
for its tokens before the next is queued (the draft depends on them).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from mlxctl.errors import BadInputError

MODES = ("off", "ngram", "draft")
CHAIN_ENV = "MLXCTL_CHAIN_CHECKS"  # 1: chained checks (SpeculationConfig.chain) unless told otherwise
DEFAULT_DRAFT_TOKENS = 8
MAX_DRAFT_TOKENS = 64
NGRAM_MAX = 4  # the longest suffix looked up first
NGRAM_MIN = 2  # the shortest one tried before giving up (a single token matches too often)


@dataclass(frozen=True)
class SpeculationConfig:
    """``--speculative``, ``--num-draft-tokens``, ``--draft-model``, ``--draft-dtype`` and
    ``--grow-drafts`` (``grow``)."""

    mode: str = "off"
    num_draft_tokens: int = DEFAULT_DRAFT_TOKENS
    draft_model: str | None = None  # mode "draft": the model reference that drafts
    draft_dtype: str = "auto"
    max_rows: int | None = None  # the largest batch that speculates (None: by backend, speculative_step.max_rows)
    measured: bool = True  # False: speculate whenever eligible, without the policy's measurements (tests)
    mixer_replay: bool = True  # recurrent models: undo a rejected draft by their mixers alone (False: the whole model)
    # ngram: a draft taken whole doubles the next one, up to grow_ceiling (see SpeculationStats): None (the
    # default) while the request is alone in the batch, True in batches too, False never. A batch's check is as wide
    # as its longest draft, so one row's growth costs every row; lone requests measured in docs/benchmarks.md
    grow: bool | None = None
    # ngram, a lone request: queue the next check before this one is read (engine/speculative_chain.py).
    # Experimental, off unless MLXCTL_CHAIN_CHECKS=1: on an H100 a 30-layer model made 0.83x with it
    # (docs/benchmarks.md)
    chain: bool = field(default_factory=lambda: os.environ.get(CHAIN_ENV) == "1")

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise BadInputError(f"unknown speculative mode {self.mode!r}", hint=f"choose one of: {', '.join(MODES)}")
        if not 1 <= self.num_draft_tokens <= MAX_DRAFT_TOKENS:
            raise BadInputError(f"num_draft_tokens must be between 1 and {MAX_DRAFT_TOKENS}, "
                                f"got {self.num_draft_tokens}")
        if self.mode == "draft" and not self.draft_model:
            raise BadInputError("speculative mode draft needs a draft_model", hint="name a smaller model of the "
                                "same family, e.g. its 4-bit or a smaller size")
        if self.draft_model and self.mode != "draft":
            raise BadInputError(f"a draft_model is used by speculative mode draft, not {self.mode}")
        if self.grow is not None and self.mode != "ngram":
            raise BadInputError(f"grow (growing drafts) is for speculative mode ngram, not {self.mode}")

    @property
    def enabled(self) -> bool:
        return self.mode != "off"


MISSES = 3  # drafts in a row with nothing accepted before a request pauses drafting
PAUSE_TOKENS = 32  # tokens it then decodes plainly before it drafts again
RELAX_TOKENS = 128  # tokens decoded without a check over which a request's expectation returns to its draft length
EXPECT_WEIGHT = 0.5  # of the newest check in a request's expected acceptance
GROW_FACTOR = 4  # a growing draft reaches at most this many times the request's draft length


def grow_ceiling(k: int, backend: str) -> int:
    """The longest draft a request of draft length ``k`` grows to: ``GROW_FACTOR`` times ``k``,
    at most ``MAX_DRAFT_TOKENS``, and on CUDA at most one token short of the widest check that
    runs unfused (models/short_attention.py: a wider one would build a cuDNN graph for every new
    cache length). Never below ``k``."""
    from mlxctl.models.short_attention import MAX_QUERIES

    ceiling = min(GROW_FACTOR * k, MAX_DRAFT_TOKENS)
    if backend == "cuda":
        ceiling = min(ceiling, MAX_QUERIES - 1)
    return max(k, ceiling)


@dataclass
class SpeculationStats:
    """Draft tokens checked and accepted (per request, and the engine's totals). Per request,
    also when it drafts again: after ``MISSES`` drafts in a row with nothing accepted (its text
    does not repeat, or the draft model guesses wrong) it pauses for ``PAUSE_TOKENS`` tokens;
    and, with ``SpeculationConfig.grow``, how long its next draft is: a draft taken whole (a
    long stretch being copied) doubles the next, up to a ceiling, and any rejection goes back to
    the request's own length (``draft_length``)."""

    steps: int = 0  # drafts checked (a batch's step checks one per drafting request)
    drafted: int = 0
    accepted: int = 0
    misses: int = 0  # drafts in a row with nothing accepted
    paused_until: int = 0  # a request: it drafts again once it has generated this many tokens
    grown: int = 0  # a request's next draft length after drafts taken whole (0: its own)
    streak: int = 0  # drafts in a row taken whole
    expected: float | None = None  # a request: draft tokens its checks keep, a moving average (None: unchecked)
    checked_at: int = 0  # a request: its generated tokens at its last check

    def expect(self, k: int, generated: int) -> float:
        """Draft tokens a request's next check is expected to keep (engine/speculative_policy.py
        weighs them against what a check costs): its checks' moving average, returning to the
        draft length ``k`` (unknown: hope) over ``RELAX_TOKENS`` tokens decoded without a check,
        so that where checks are cheap a request whose text stopped repeating tries again soon,
        and where they are dear, late."""
        if self.expected is None:
            return float(k)
        return self.expected + (k - self.expected) * min(1.0, (generated - self.checked_at) / RELAX_TOKENS)

    def draft_length(self, k: int, ceiling: int) -> int:
        """The next draft's length for a request of draft length ``k``, growing up to ``ceiling``."""
        return min(max(k, self.grown), ceiling)

    def add(self, drafted: int, accepted: int, generated: int = 0, ceiling: int = 0) -> None:
        """A checked draft; with a ``ceiling`` (growing drafts) one taken whole doubles the next."""
        self.steps += 1
        self.drafted += drafted
        self.accepted += accepted
        old = self.expected
        self.expected = accepted if old is None else old + EXPECT_WEIGHT * (accepted - old)
        self.checked_at = generated
        self.grown = min(2 * drafted, ceiling) if ceiling and drafted and accepted == drafted else 0
        self.streak = self.streak + 1 if drafted and accepted == drafted else 0
        self.misses = 0 if accepted else self.misses + 1
        if self.misses >= MISSES:
            self.misses, self.paused_until = 0, generated + PAUSE_TOKENS

    def drafting(self, generated: int) -> bool:
        return generated >= self.paused_until

    def as_dict(self) -> dict:
        rate = self.accepted / self.drafted if self.drafted else 0.0
        return {"steps": self.steps, "draft_tokens": self.drafted, "accepted_tokens": self.accepted,
                "acceptance_rate": round(rate, 4)}


class NgramProposer:
    """Prompt lookup over one request's tokens. Every n-gram (``NGRAM_MIN`` to ``NGRAM_MAX``
    tokens) is indexed once by where it last ended, so a lookup costs the same at any length."""

    catch_up_s = 0.0  # what DraftProposer times apart; prompt lookup has nothing to catch up on

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.tokens: list[int] = []
        self._copy: tuple[int, int, int] | None = None  # the last proposal: (source, period, tokens drafted so far)
        self._ends: dict[tuple[int, ...], int] = {}  # n-gram -> end (exclusive) of its latest occurrence
        self._indexed = 0  # n-grams ending at positions up to here are in ``_ends``

    def propose(self, history: list[int], k: int) -> list[int]:
        """Up to ``k`` tokens that followed the latest earlier occurrence of the longest suffix
        of ``history`` (the request's tokens so far, only ever appended to) found, from
        ``NGRAM_MAX`` tokens down to ``NGRAM_MIN``; [] when none recurs. Where that occurrence
        is closer to the end than ``k`` tokens (text repeating with a short period: a token or a
        line over and over) the copy runs on over what it copies, as an overlapping LZ77 copy
        does, so a loop of period p still drafts ``k`` tokens, not p."""
        self._extend(history)
        tokens, found = self.tokens, self._suffix_found()
        self._copy = None if found is None else (found, len(tokens) - found, k)
        if found is None:
            return []
        return self._copied(0, k)

    def following(self, m: int) -> list[int]:
        """The next draft if the last one is taken whole: the ``m`` tokens the copy goes on with
        after the one that follows that draft, guessed before the check says whether the copy
        held (engine/speculative_chain.py chains checks on it); [] without a copy to go on with.
        Each call moves the copy on as if that draft were taken whole too."""
        if self._copy is None or m <= 0:
            return []
        found, period, done = self._copy
        self._copy = (found, period, done + 1 + m)
        return self._copied(done + 1, done + 1 + m)

    def _copied(self, start: int, stop: int) -> list[int]:
        """Positions ``start`` to ``stop`` of the copy after the proposal's history, running on
        over what it copies (an overlapping LZ77 copy)."""
        found, period, _ = self._copy
        return [self.tokens[found + i % period] for i in range(start, stop)]

    def likely(self, prompt: list[int], generated: list[int]) -> bool:
        """Whether the request's tokens so far, before the pending one (still on the device),
        end in an n-gram that occurred before: where they do not, a draft after the pending token
        is unlikely, and the step need not wait for that token to look (engine/speculative_step.py)."""
        n = len(prompt)
        self._forget_stale(n + len(generated), lambda i: prompt[i] if i < n else generated[i - n])
        if len(self.tokens) < len(prompt):
            self._extend(prompt)
        self.tokens.extend(generated[len(self.tokens) - len(prompt):])
        return self._suffix_found() is not None

    def _extend(self, history: list[int]) -> None:
        self._forget_stale(len(history), history.__getitem__)
        self.tokens.extend(history[len(self.tokens):])

    def _forget_stale(self, length: int, token_at: Any) -> None:
        """Start the index over where its last token is not the request's (``length`` tokens,
        ``token_at(i)`` the i-th): a pending token a failed step never emitted, the only one
        that can have gone; the request's own tokens are indexed again."""
        last = len(self.tokens) - 1
        if last >= length or (last >= 0 and self.tokens[last] != token_at(last)):
            self._reset()

    def _suffix_found(self) -> int | None:
        """Where the latest earlier occurrence of the longest recurring suffix (``NGRAM_MAX``
        down to ``NGRAM_MIN`` tokens) ends, or None; indexes what was appended since the last call."""
        tokens = self.tokens
        end = len(tokens)
        # index the n-grams ending before the last position (the suffix itself must not match)
        for stop in range(self._indexed + 1, end):
            for n in range(NGRAM_MIN, min(NGRAM_MAX, stop) + 1):
                self._ends[tuple(tokens[stop - n:stop])] = stop
        self._indexed = max(self._indexed, end - 1)
        for n in range(min(NGRAM_MAX, end), NGRAM_MIN - 1, -1):
            found = self._ends.get(tuple(tokens[end - n:]))
            if found is not None:
                return found
        return None


class DraftProposer:
    """A smaller model with the same vocabulary guesses the next ``k`` tokens greedily, with a
    cache of its own per request. What it guessed and the target rejected is cut from that cache
    at the next proposal; tokens it has not seen (the prompt at first, then the accepted and the
    next token) go through it first, a chunk at a time."""

    CHUNK = 512

    def __init__(self, model: Any) -> None:
        self.model = model
        self.cache: list[Any] | None = None
        self.cached: list[int] = []  # the tokens its cache holds
        self._known = 0  # of those, how many are the request's own (not guesses)
        self.catch_up_s = 0.0  # the last proposal: seconds bringing the cache up to date past a check's worth

    def likely(self, prompt: list[int], generated: list[int]) -> bool:
        return True  # a draft model always guesses

    def propose(self, history: list[int], k: int) -> list[int]:
        import mlx.core as mx
        from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache

        if self.cache is None:
            self.cache = make_prompt_cache(self.model)
        # what it saw of the request's own tokens, but the last proposal's pending token where a failed
        # step never emitted it (the request resumed with another in its place)
        keep = min(self._known, len(history) - 1)
        if keep and self.cached[keep - 1] != history[keep - 1]:
            keep -= 1
        while keep < min(len(self.cached), len(history) - 1) and self.cached[keep] == history[keep]:
            keep += 1
        if len(self.cached) > keep:
            trim_prompt_cache(self.cache, len(self.cached) - keep)
        new = history[keep:]
        start_s = time.perf_counter()
        for start in range(0, len(new) - 1, self.CHUNK):
            self.model(mx.array([new[start:min(start + self.CHUNK, len(new) - 1)]]), cache=self.cache)
            mx.eval([c.state for c in self.cache])
        # more than a check's worth of tokens unseen (the prompt, or what plain steps decoded while the
        # policy declined): not what a check costs (engine/speculative_policy.py)
        self.catch_up_s = time.perf_counter() - start_s if len(new) - 1 > k + 1 else 0.0
        token = mx.argmax(self.model(mx.array([new[-1:]]), cache=self.cache)[:, -1, :], axis=-1)
        draft = [token]
        for _ in range(k - 1):
            token = mx.argmax(self.model(token[:, None], cache=self.cache)[:, -1, :], axis=-1)
            draft.append(token)
        guessed = mx.concatenate(draft).tolist()
        self.cached, self._known = history + guessed[:-1], len(history)
        return guessed


def accept(sampler: Any, logits: Any, drafts: list[int], masks: Any = None) -> tuple[list[int], list[Any]]:
    """Check ``drafts`` against (d+1, V) ``logits`` (position j predicts draft j; the last one
    the token after a fully accepted draft), each position among the tokens its row of
    ``masks`` allows (a grammar's, (d+1, V) bool; None: all). Returns the tokens to emit (the
    accepted drafts and the token sampled after them) and each one's logprob data (None
    without logprobs)."""
    return settle(sampler, draw(sampler, logits, masks), drafts)


@dataclass
class Drawn:
    """A check's positions sampled, not yet read: each position's token (``tokens``, (d+1,)),
    and for a sampler with state or logprobs each draw's output and the sampler's state after
    it (None for a bare argmax)."""

    tokens: Any
    outs: list[Any] | None = None
    states: list[tuple] | None = None


def draw(sampler: Any, logits: Any, masks: Any = None) -> Drawn:
    """Sample every position of (d+1, V) ``logits`` in order, lazily (the sampler's state moves
    on past all of them until :func:`settle`)."""
    import mlx.core as mx

    if sampler.is_plain_greedy and masks is None:
        return Drawn(mx.argmax(logits, axis=-1))
    outs, states = [], []
    for j in range(logits.shape[0]):
        outs.append(sampler.sample(logits[j], None if masks is None else masks[j]))
        states.append(sampler.snapshot())
    return Drawn(mx.stack([o.token for o in outs]), outs, states)


def settle(sampler: Any, drawn: Drawn, drafts: list[int]) -> tuple[list[int], list[Any]]:
    """Read a :func:`draw`: the accepted drafts and the token sampled after them, with their
    logprob data; the sampler's state goes back to the emitted positions."""
    import mlx.core as mx

    if drawn.outs is None:
        return _accepted(drawn.tokens.tolist(), drafts), [None] * (len(drafts) + 1)
    mx.eval(drawn.tokens, [o.logprobs.arrays() for o in drawn.outs if o.logprobs is not None],
            [a for a in drawn.states[-1] if a is not None])
    tokens = _accepted(drawn.tokens.tolist(), drafts)
    sampler.restore(drawn.states[len(tokens) - 1])  # as if only the emitted positions were drawn
    return tokens, [o.logprobs for o in drawn.outs[:len(tokens)]]


def accept_rows(samplers: list[Any], logits: Any, drafts: list[list[int]],
                masks: list[Any] | None = None) -> list[tuple[list[int], list[Any]]]:
    """:func:`accept` for each row of (B, L, V) ``logits`` (``masks``: each row's, or None);
    the plain greedy rows without a grammar from one argmax."""
    import mlx.core as mx

    masks = masks or [None] * len(samplers)
    plain = [i for i, s in enumerate(samplers) if s.is_plain_greedy and masks[i] is None]
    chosen = dict(zip(plain, mx.argmax(logits[mx.array(plain)] if len(plain) < len(samplers) else logits,
                                       axis=-1).tolist())) if plain else {}
    return [(_accepted(chosen[i], d), [None] * (len(d) + 1)) if i in chosen else accept(samplers[i], logits[i], d, masks[i])
            for i, d in enumerate(drafts)]


def _accepted(chosen: list[int], drafts: list[int]) -> list[int]:
    n = 0
    while n < len(drafts) and chosen[n] == drafts[n]:
        n += 1
    return chosen[:n + 1]


def same_vocabulary(a: Any, b: Any) -> bool:
    """Whether two tokenizers give every token the same id (a draft model must speak the
    target's ids)."""
    vocab_a, vocab_b = getattr(a, "get_vocab", None), getattr(b, "get_vocab", None)
    if vocab_a is None or vocab_b is None:
        return type(a) is type(b)
    return vocab_a() == vocab_b()
