"""Per-request sampling: the parameters, a stateful sampler, and batch sampling.

A :class:`TokenSampler` turns one request's logits row into a token with mlx ops only and never
forces evaluation: every result (the token, its logprobs, the penalty state) is a lazy array, so the
runner can queue step ``n+1`` before step ``n`` has been evaluated and ``mx.async_eval`` everything
at once (see :func:`arrays_to_eval`).

Processing order, per row: the structured-output mask (tokens a ``constraint``'s grammar does not
allow next get ``-inf``) -> ``logit_bias`` -> ``repetition_penalty`` -> ``presence_penalty`` /
``frequency_penalty`` (these give the *processed* logits) -> temperature -> top-k -> top-p -> min-p
-> a categorical draw (``argmax`` when greedy).

Logprobs follow vLLM's "processed" semantics: ``log_softmax`` of the processed logits, that is after
bias and penalties but before temperature and the top-k / top-p / min-p filters. So a token can
be reported with a finite logprob even though a filter made it impossible to draw; a token the
grammar mask rules out is reported at ``MASKED_LOGPROB`` (OpenAI's -9999 floor), never ``-inf``.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field

import mlx.core as mx

from mlxctl.engine.constraints import ConstraintSpec
from mlxctl.engine.shared_sampling import sample_shared
from mlxctl.errors import BadInputError

MAX_TOP_LOGPROBS = 20
MASKED_LOGPROB = -9999.0


def _freeze_bias(bias) -> tuple[tuple[int, float], ...]:
    items = bias.items() if isinstance(bias, Mapping) else bias
    return tuple((int(token), float(value)) for token, value in items)


def _check_range(name: str, value, low, high) -> None:
    if not low <= value <= high:  # also rejects NaN
        raise BadInputError(f"{name} must be between {low} and {high}, got {value}")


def _check_token(name: str, token: int, vocab_size: int | None) -> None:
    if token < 0 or (vocab_size is not None and token >= vocab_size):
        allowed = "at least 0" if vocab_size is None else f"between 0 and {vocab_size - 1}"
        raise BadInputError(f"{name} token id must be {allowed}, got {token}")


@dataclass(frozen=True)
class SamplingParams:
    """How to pick each next token of one request (OpenAI / vLLM field semantics)."""

    max_tokens: int | None = 256  # None: until the context is full
    # The request field (or CLI flag) max_tokens was given as: a value that does not fit what the
    # prompt leaves of the context is refused, naming it. None: a default, capped to that room.
    max_tokens_field: str | None = None
    temperature: float = 1.0  # 0: greedy
    top_p: float = 1.0
    top_k: int = 0  # 0: off
    min_p: float = 0.0
    repetition_penalty: float = 1.0  # HF/vLLM: multiplicative, over prompt + generated tokens
    presence_penalty: float = 0.0  # OpenAI: additive, over generated tokens only
    frequency_penalty: float = 0.0  # OpenAI: additive per occurrence, generated tokens only
    logit_bias: tuple[tuple[int, float], ...] = ()  # a mapping is accepted and frozen
    seed: int | None = None
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    skip_special_tokens: bool = True  # False: special tokens (format markers) stay in the text
    logprobs: bool = False
    top_logprobs: int = 0  # 0..20; needs logprobs=True
    constraint: ConstraintSpec | None = None  # structured output; compiled by Engine.submit
    num_draft_tokens: int | None = None  # speculative decoding: this request's most draft tokens (0: none)

    def __post_init__(self) -> None:
        stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)
        object.__setattr__(self, "stop", stop)
        object.__setattr__(self, "stop_token_ids", tuple(self.stop_token_ids))
        object.__setattr__(self, "logit_bias", _freeze_bias(self.logit_bias))

    @property
    def is_greedy(self) -> bool:
        """True when the choice is the argmax of the processed logits."""
        return self.temperature == 0 or self.top_k == 1

    def validate(self, vocab_size: int | None = None) -> None:
        """Raise :class:`BadInputError` naming the first field out of its allowed range."""
        if self.max_tokens is not None and self.max_tokens < 1:
            raise BadInputError(f"max_tokens must be at least 1, got {self.max_tokens}")
        _check_range("temperature", self.temperature, 0, 2)
        if not 0 < self.top_p <= 1:
            raise BadInputError(f"top_p must be greater than 0 and at most 1, got {self.top_p}")
        if self.top_k < 0:
            raise BadInputError(f"top_k must be at least 0 (0 turns it off), got {self.top_k}")
        _check_range("min_p", self.min_p, 0, 1)
        if not 0 < self.repetition_penalty <= 2:
            raise BadInputError(
                f"repetition_penalty must be greater than 0 and at most 2, "
                f"got {self.repetition_penalty}"
            )
        _check_range("presence_penalty", self.presence_penalty, -2, 2)
        _check_range("frequency_penalty", self.frequency_penalty, -2, 2)
        self._validate_tokens(vocab_size)
        self._validate_outputs()

    def _validate_tokens(self, vocab_size: int | None) -> None:
        for token, bias in self.logit_bias:
            _check_token("logit_bias", token, vocab_size)
            _check_range(f"logit_bias for token {token}", bias, -100, 100)
        for token in self.stop_token_ids:
            _check_token("stop_token_ids", token, vocab_size)

    def _validate_outputs(self) -> None:
        if any(not isinstance(s, str) or not s for s in self.stop):
            raise BadInputError("stop must contain only non-empty strings")
        _check_range("top_logprobs", self.top_logprobs, 0, MAX_TOP_LOGPROBS)
        if self.num_draft_tokens is not None:
            _check_range("num_draft_tokens", self.num_draft_tokens, 0, 64)
        if self.top_logprobs and not self.logprobs:
            raise BadInputError("top_logprobs needs logprobs to be true")
        if self.constraint is not None:
            if not isinstance(self.constraint, ConstraintSpec):
                raise BadInputError("constraint must be a ConstraintSpec")
            self.constraint.check()


@dataclass
class TokenLogprobs:
    """Lazy logprob results for one sampled token (top_* are None when top_logprobs is 0)."""

    logprob: mx.array  # () float32: the chosen token's processed logprob
    top_ids: mx.array | None = None  # (N,) int32, most likely first
    top_logprobs: mx.array | None = None  # (N,) float32, descending

    def arrays(self) -> list[mx.array]:
        return [a for a in (self.logprob, self.top_ids, self.top_logprobs) if a is not None]


@dataclass
class SampleOut:
    token: mx.array  # () int32, lazy
    logprobs: TokenLogprobs | None = None


@dataclass
class BatchSample:
    tokens: mx.array  # (B,) int32, lazy
    per_row: list[TokenLogprobs | None]
    state: list[mx.array] = field(default_factory=list)  # samplers' updated counts and keys


class TokenSampler:
    """Samples one request's tokens, keeping its penalty counts and PRNG key as mx arrays.

    ``vocab_size`` is the width of the model's logits row (it may exceed the tokenizer's vocab).
    A seeded request draws from its own key, split once per step, so its tokens depend only on
    its own logits, never on what else shares the batch.
    """

    def __init__(self, params: SamplingParams, vocab_size: int, prompt_tokens: list[int]):
        params.validate(vocab_size)
        self.params = params
        self.vocab_size = vocab_size
        self._bias = self._dense_bias(params.logit_bias, vocab_size)
        self._counts = self._initial_counts(params, vocab_size)
        self._prompt_mask = self._initial_prompt_mask(params, vocab_size, prompt_tokens)
        seed = secrets.randbits(64) if params.seed is None else params.seed % 2**64
        self._key = mx.random.key(seed)

    @classmethod
    def resumed(cls, old: "TokenSampler", prompt_tokens: list[int], generated: list[int]) -> "TokenSampler":
        """A sampler for a request resumed from a checkpoint: penalty counts rebuilt from the
        tokens already emitted (the old ones may count a token sampled in the failed step), the
        random key carried on."""
        new = cls(old.params, old.vocab_size, prompt_tokens)
        if new._counts is not None and generated:
            ids = mx.array([t for t in generated if 0 <= t < old.vocab_size], dtype=mx.int32)
            new._counts = new._counts.at[ids].add(1.0)
        new._key = old._key
        return new

    @property
    def is_plain_greedy(self) -> bool:
        """Greedy with nothing to process or report: a bare argmax of the raw logits."""
        p = self.params
        return p.is_greedy and not p.logprobs and self._bias is None and self._counts is None

    @property
    def shares_batch(self) -> bool:
        """Nothing of its own to process, report or draw from: sampled with the batch's other
        such rows in one go (engine.shared_sampling)."""
        p = self.params
        return (p.is_greedy or p.seed is None) and not p.logprobs and self._bias is None and self._counts is None

    @staticmethod
    def _dense_bias(logit_bias, vocab_size: int) -> mx.array | None:
        if not logit_bias:
            return None
        ids = mx.array([token for token, _ in logit_bias], dtype=mx.int32)
        values = mx.array([value for _, value in logit_bias], dtype=mx.float32)
        return mx.zeros((vocab_size,), dtype=mx.float32).at[ids].add(values)

    @staticmethod
    def _initial_counts(params: SamplingParams, vocab_size: int) -> mx.array | None:
        penalised = (
            params.repetition_penalty != 1
            or params.presence_penalty != 0
            or params.frequency_penalty != 0
        )
        return mx.zeros((vocab_size,), dtype=mx.float32) if penalised else None

    @staticmethod
    def _initial_prompt_mask(params, vocab_size: int, prompt_tokens) -> mx.array | None:
        if params.repetition_penalty == 1:
            return None
        ids = [t for t in prompt_tokens if 0 <= t < vocab_size]
        mask = mx.zeros((vocab_size,), dtype=mx.bool_)
        if ids:
            mask[mx.array(ids, dtype=mx.int32)] = True
        return mask

    def state_arrays(self) -> list[mx.array]:
        """The sampler's lazy state (PRNG key, penalty counts), to evaluate with each step."""
        return [self._key] if self._counts is None else [self._key, self._counts]

    def snapshot(self) -> tuple:
        """The state a later :meth:`restore` goes back to (lazy arrays; never mutated in place)."""
        return self._key, self._counts

    def restore(self, state: tuple) -> None:
        self._key, self._counts = state

    def process_logits(self, logits: mx.array, mask: mx.array | None = None) -> mx.array:
        """Apply the grammar ``mask`` (bool, True = allowed), logit_bias, then repetition,
        presence and frequency penalties (no state change)."""
        logits = logits.astype(mx.float32)
        if mask is not None:
            logits = mx.where(mask, logits, -math.inf)
        if self._bias is not None:
            logits = logits + self._bias
        if self._counts is None:
            return logits
        p = self.params
        generated = self._counts > 0
        if p.repetition_penalty != 1:
            seen = mx.logical_or(generated, self._prompt_mask)
            penalised = mx.where(
                logits > 0, logits / p.repetition_penalty, logits * p.repetition_penalty
            )
            logits = mx.where(seen, penalised, logits)
        if p.frequency_penalty != 0:
            logits = logits - p.frequency_penalty * self._counts
        if p.presence_penalty != 0:
            logits = logits - p.presence_penalty * generated.astype(mx.float32)
        return logits

    def sample(self, logits_row: mx.array, mask: mx.array | None = None) -> SampleOut:
        """Pick the next token from a (V,) logits row, among the tokens ``mask`` allows (all when
        None); all results stay lazy."""
        logits = self.process_logits(logits_row, mask)
        token = self._choose(logits)
        if self._counts is not None:
            self._counts = self._counts.at[token].add(1.0)
        if not self.params.logprobs:
            return SampleOut(token)
        return SampleOut(token, self._logprobs(logits, token, masked=mask is not None))

    def _choose(self, logits: mx.array) -> mx.array:
        if self.params.is_greedy:
            return mx.argmax(logits).astype(mx.int32)
        self._key, step_key = mx.random.split(self._key)
        filtered = self._filter(logits / self.params.temperature)
        return mx.random.categorical(filtered, key=step_key).astype(mx.int32)

    def _filter(self, logits: mx.array) -> mx.array:
        p = self.params
        top_k = p.top_k if 0 < p.top_k < self.vocab_size else 0
        if top_k:
            logits = _top_k(logits, top_k)
        if p.top_p < 1:
            logits = _top_p(logits, p.top_p, top_k)
        if p.min_p > 0:
            logits = _min_p(logits, p.min_p)
        return logits

    def _logprobs(self, logits: mx.array, token: mx.array, masked: bool = False) -> TokenLogprobs:
        logprobs = logits - mx.logsumexp(logits)
        if masked:  # JSON has no -inf: a ruled-out token gets a floor value instead
            logprobs = mx.maximum(logprobs, MASKED_LOGPROB)
        chosen = mx.take(logprobs, token)
        n = min(self.params.top_logprobs, self.vocab_size)
        if n == 0:
            return TokenLogprobs(chosen)
        top_ids = mx.argpartition(-logprobs, kth=n - 1)[:n]
        top_values = mx.take(logprobs, top_ids)
        order = mx.argsort(-top_values)
        return TokenLogprobs(chosen, top_ids[order].astype(mx.int32), top_values[order])


def _top_k(logits: mx.array, k: int) -> mx.array:
    """Keep the k largest logits (ties with the k-th are kept too)."""
    threshold = mx.min(mx.topk(logits, k))
    return mx.where(logits < threshold, -math.inf, logits)


def _top_p(logits: mx.array, top_p: float, top_k: int = 0) -> mx.array:
    """Keep the smallest most-likely set whose probability mass reaches top_p.

    After a top-k filter only the k survivors can carry mass, so only they are sorted.
    """
    candidates = mx.topk(logits, top_k) if top_k else logits
    descending = mx.sort(candidates)[::-1]
    probs = mx.softmax(descending)
    mass_before = mx.cumsum(probs) - probs
    kept = mx.sum(mass_before < top_p)  # >= 1: the first token has mass_before == 0
    threshold = mx.take(descending, kept - 1)
    return mx.where(logits < threshold, -math.inf, logits)


def _min_p(logits: mx.array, min_p: float) -> mx.array:
    """Keep tokens at least min_p times as likely as the most likely one."""
    threshold = mx.max(logits) + math.log(min_p)
    return mx.where(logits < threshold, -math.inf, logits)


def sample_batch(logits: mx.array, samplers: list[TokenSampler],
                 masks: list[mx.array | None] | None = None) -> BatchSample:
    """Sample one token per row of (B, V) ``logits``; row i belongs to ``samplers[i]`` and draws
    among the tokens ``masks[i]`` allows (every token when ``masks`` or ``masks[i]`` is None).

    When every row is plain greedy and unmasked this is a single vectorised argmax, nothing more.
    """
    if masks is not None and all(m is None for m in masks):
        masks = None
    if masks is None and all(s.is_plain_greedy for s in samplers):
        return BatchSample(mx.argmax(logits, axis=-1).astype(mx.int32), [None] * len(samplers))
    masks = masks or [None] * len(samplers)
    shared = [i for i, s in enumerate(samplers) if masks[i] is None and s.shares_batch]
    if len(shared) < 2:
        shared = []
    own = [i for i in range(len(samplers)) if i not in set(shared)]
    outs = {i: samplers[i].sample(logits[i], masks[i]) for i in own}
    state = [a for i in own for a in samplers[i].state_arrays()]
    per_row = [outs[i].logprobs if i in outs else None for i in range(len(samplers))]
    if not shared:
        return BatchSample(mx.stack([outs[i].token for i in own]), per_row, state)
    rows = logits if len(shared) == len(samplers) else logits[mx.array(shared)]
    tokens = sample_shared(rows, [samplers[i].params for i in shared])
    if own:  # back in row order: the shared rows' tokens, then the others', permuted
        order = shared + own
        place = mx.array(sorted(range(len(order)), key=order.__getitem__))
        tokens = mx.concatenate([tokens, mx.stack([outs[i].token for i in own])])[place]
    return BatchSample(tokens, per_row, state)


def arrays_to_eval(batch: BatchSample) -> list[mx.array]:
    """Every lazy array a step produced, for one ``mx.async_eval`` call."""
    arrays = [batch.tokens, *batch.state]
    for row in batch.per_row:
        if row is not None:
            arrays.extend(row.arrays())
    return arrays
