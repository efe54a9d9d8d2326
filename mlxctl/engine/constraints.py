"""Structured output: a grammar enforced on every sampled token, through llguidance.

A request asks for it with a :class:`ConstraintSpec` (``SamplingParams.constraint``). The spec
is compiled when the request is submitted (:func:`compile_constraint`: an invalid schema, regex
or grammar is a :class:`~mlxctl.errors.BadInputError` before anything is queued), and each
request gets its own :class:`Matcher`, which follows the tokens the request generates and gives
the mask of the tokens allowed next: a bool row as wide as the model's logits, padded with
"disallowed" where the logits are wider than the tokenizer's vocabulary.

Compiled grammars are shared: the llguidance tokenizer is built once per tokenizer object (about
half a second) and each compiled grammar is kept in a small LRU, so a schema sent with every
request is compiled once; a request's matcher is a cheap copy of the cached one.

Masks are computed on the CPU into a packed numpy bitmask (32 tokens per int32 word, llguidance
fills it directly), turned into one ``mx.array`` per batch and unpacked there with mx ops, so only
the packed words cross to the device.
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import mlx.core as mx
import numpy as np

from mlxctl.errors import BadInputError

ConstraintKind = Literal["json_object", "json_schema", "regex", "lark"]
KINDS: tuple[str, ...] = ("json_object", "json_schema", "regex", "lark")
_LABELS = {"json_object": "JSON object", "json_schema": "JSON schema", "regex": "regex", "lark": "Lark grammar"}

# Whitespace allowed between JSON tokens: enough for pretty-printed JSON, bounded so that a small
# model cannot loop on newlines forever (llguidance's default allows any amount).
JSON_WHITESPACE = r"[\x20\x0A\x0D\x09]{0,24}"
GRAMMAR_CACHE_SIZE = 64
MAX_LEADING_WHITESPACE = 8  # whitespace-only tokens allowed between an activation marker and the output
_MAX_MESSAGE = 400


@dataclass(frozen=True)
class ConstraintSpec:
    """What a request's output must match.

    ``kind``: ``json_object`` (any JSON object; ``value`` unused), ``json_schema`` (``value`` is the
    schema as JSON text), ``regex`` (``value`` is the pattern, matched in full; Rust regex syntax,
    with ASCII digit, word and space classes) or ``lark``
    (``value`` is an llguidance Lark grammar). ``strict=False`` lets a JSON schema use keywords
    llguidance does not implement (they are ignored instead of refused); the output is enforced
    either way. ``activate_after``: a text marker such as ``"</think>"``; the output is free until
    the generated text contains it, and constrained from there on (whitespace right after the
    marker, up to ``MAX_LEADING_WHITESPACE`` tokens of it, stays free too). ``token_markers``
    (for Lark grammars mlxctl writes): the markers its rules' string literals spell that the
    tokenizer has as one added token are matched as that token, by id
    (:mod:`~mlxctl.engine.token_markers`).
    """

    kind: ConstraintKind
    value: str = ""
    strict: bool = True
    activate_after: str | None = None
    token_markers: bool = False

    def check(self) -> None:
        """Cheap shape checks (no tokenizer needed); raise :class:`BadInputError`."""
        if self.kind not in KINDS:
            raise BadInputError(f"constraint kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if not isinstance(self.value, str):
            raise BadInputError(f"{_LABELS[self.kind]} must be given as text")
        if self.kind != "json_object" and not self.value.strip():
            raise BadInputError(f"an empty {_LABELS[self.kind]} cannot constrain the output")
        if self.activate_after is not None and (not isinstance(self.activate_after, str) or not self.activate_after):
            raise BadInputError("activate_after must be a non-empty string")


# -- compiling ------------------------------------------------------------------------------


class _Grammar:
    """One compiled grammar for one llguidance tokenizer; ``template`` is never advanced."""

    def __init__(self, ll_tokenizer: Any, text: str, template: Any):
        self.ll_tokenizer = ll_tokenizer
        self.text = text
        self.template = template
        self.warnings: list[str] = list(template.get_grammar_warnings())
        self._lock = threading.Lock()

    def new_matcher(self) -> Any:
        with self._lock:
            return self.template.deep_copy()


@dataclass(frozen=True)
class CompiledConstraint:
    """A validated spec bound to a tokenizer; :meth:`matcher` makes one request's matcher."""

    spec: ConstraintSpec
    grammar: _Grammar

    @property
    def warnings(self) -> list[str]:
        return self.grammar.warnings

    def matcher(self, vocab_width: int) -> Matcher:
        return Matcher(self, vocab_width)


_lock = threading.Lock()
_tokenizers: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_strong_tokenizers: dict[int, tuple[Any, Any]] = {}  # for tokenizer objects without weakrefs
_grammars: OrderedDict[tuple, _Grammar] = OrderedDict()
_whitespace: dict[int, tuple[Any, frozenset[int], np.ndarray]] = {}  # id(LLTokenizer) -> its tokens


def compile_constraint(spec: ConstraintSpec, tokenizer: Any) -> CompiledConstraint:
    """Validate ``spec`` against ``tokenizer`` (mlx-lm's wrapper, a fast HF tokenizer or an
    ``llguidance.LLTokenizer``); raise :class:`BadInputError` with llguidance's reason."""
    if not isinstance(spec, ConstraintSpec):
        raise BadInputError(f"a constraint must be a ConstraintSpec, got {type(spec).__name__}")
    spec.check()
    llt = ll_tokenizer(tokenizer)
    key = (id(llt), spec.kind, spec.value, spec.strict, spec.token_markers)
    with _lock:
        hit = _grammars.get(key)
        if hit is not None and hit.ll_tokenizer is llt:
            _grammars.move_to_end(key)
            return CompiledConstraint(spec, hit)
    grammar = _compile(spec, llt, tokenizer)
    with _lock:
        _grammars[key] = grammar
        _grammars.move_to_end(key)
        while len(_grammars) > GRAMMAR_CACHE_SIZE:
            _grammars.popitem(last=False)
    return CompiledConstraint(spec, grammar)


def ll_tokenizer(tokenizer: Any) -> Any:
    """The llguidance tokenizer for ``tokenizer``, built on first use and then cached (the
    server may call this at start-up so the first structured request does not pay for it)."""
    import llguidance

    if isinstance(tokenizer, llguidance.LLTokenizer):
        return tokenizer
    with _lock:
        try:
            cached = _tokenizers.get(tokenizer)
        except TypeError:  # neither weak-referenceable nor hashable
            pair = _strong_tokenizers.get(id(tokenizer))
            cached = pair[1] if pair is not None and pair[0] is tokenizer else None
        if cached is not None:
            return cached
        llt = _build_ll_tokenizer(tokenizer)
        try:
            _tokenizers[tokenizer] = llt
        except TypeError:
            _strong_tokenizers[id(tokenizer)] = (tokenizer, llt)
        return llt


def _hf_tokenizer(tokenizer: Any) -> Any:
    from transformers import PreTrainedTokenizerFast

    if isinstance(tokenizer, PreTrainedTokenizerFast):
        return tokenizer
    return getattr(tokenizer, "_tokenizer", tokenizer)  # mlx-lm's TokenizerWrapper holds the HF one


def _build_ll_tokenizer(tokenizer: Any) -> Any:
    hf = _hf_tokenizer(tokenizer)
    eos = getattr(tokenizer, "eos_token_ids", None)  # mlx-lm's: a set; None: the HF default
    eos = [eos] if isinstance(eos, int) else (sorted(eos) or None) if eos else None
    try:
        import llguidance.hf

        return llguidance.hf.from_tokenizer(hf, eos_token=eos)
    except Exception as exc:  # noqa: BLE001 - llguidance raises ValueError, transformers others
        raise BadInputError(
            f"structured output needs a fast Hugging Face tokenizer; this model's "
            f"({type(hf).__name__}) cannot be used: {_one_line(str(exc))}"
        ) from None


def _whitespace_tokens(llt: Any) -> tuple[frozenset[int], np.ndarray]:
    """The tokens that decode to whitespace only, as ids and as a packed bitmask (cached)."""
    with _lock:
        hit = _whitespace.get(id(llt))
        if hit is not None and hit[0] is llt:
            return hit[1], hit[2]
        ids = frozenset(i for i in range(llt.vocab_size)
                        if not llt.is_special_token(i) and (b := llt.decode_bytes([i])) and not b.strip())
        bits = np.zeros((llt.vocab_size + 31) // 32, dtype=np.uint32)
        for i in ids:
            bits[i // 32] |= np.uint32(1 << (i % 32))
        _whitespace[id(llt)] = (llt, ids, bits.view(np.int32))
        return ids, bits.view(np.int32)


# llguidance's per-token lexer budget (its default is 200,000): text values that end at one of
# several end tags (Qwen3-Coder's, Seed-OSS's, MiniMax-M2's parameters) are complements of
# "contains a tag" regexes, and after a few calls with long values one token can need more than the
# default; the matcher then fails with "too many expressions constructed" mid-call
STEP_LEXER_FUEL = 2_000_000


def _compile(spec: ConstraintSpec, llt: Any, tokenizer: Any) -> _Grammar:
    import llguidance

    if spec.token_markers and spec.kind == "lark":
        from mlxctl.engine.token_markers import marker_tokens, refer_by_id

        spec = dataclasses.replace(spec, value=refer_by_id(spec.value, marker_tokens(_hf_tokenizer(tokenizer))))
    text = _grammar_text(spec)
    limits = llguidance.LLParserLimits(step_lexer_fuel=STEP_LEXER_FUEL)
    template = llguidance.LLMatcher(llt, text, log_level=0, limits=limits)
    if template.is_error():
        raise BadInputError(f"invalid {_LABELS[spec.kind]}: {_one_line(template.get_error())}")
    return _Grammar(llt, text, template)


def _grammar_text(spec: ConstraintSpec) -> str:
    from llguidance import LLMatcher, regex_to_lark

    if spec.kind == "regex":  # \d and \w are ASCII, as in JSON schema patterns
        return LLMatcher.grammar_from_lark(f"start: /{regex_to_lark(spec.value, 'dw')}/")
    if spec.kind == "lark":
        return LLMatcher.grammar_from_lark(spec.value)
    schema: Any = {"type": "object"}
    if spec.kind == "json_schema":
        try:
            schema = json.loads(spec.value)
        except ValueError as exc:
            raise BadInputError(f"invalid JSON schema: not valid JSON ({exc})") from None
        if not isinstance(schema, (dict, bool)):
            raise BadInputError(f"invalid JSON schema: expected an object, got {type(schema).__name__}")
    defaults = {"whitespace_flexible": True, "whitespace_pattern": JSON_WHITESPACE}
    try:
        return LLMatcher.grammar_from_json_schema(
            json.dumps(schema), defaults=defaults, overrides={"lenient": not spec.strict}
        )
    except ValueError as exc:
        raise BadInputError(f"invalid JSON schema: {_one_line(str(exc))}") from None


def _one_line(message: str) -> str:
    """llguidance's messages carry source excerpts with carets and state dumps: keep the words."""
    message = message.split("<state>")[0]
    lines = [line.strip() for line in message.splitlines()]
    kept = [line for line in lines if line and not re.fullmatch(r"\^+|\d+ \|.*", line)]
    text = " ".join(kept) or "unknown error"
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."


# -- per-request matching -------------------------------------------------------------------


class Matcher:
    """One request's grammar state, advanced by the engine with every token it generates.

    ``done``: the grammar is complete and admits nothing but EOS, so the request stops here.
    ``error``: the constraint failed (a dead end: no token allowed, or a token it rejected);
    ``rejected``: the last token given to :meth:`advance` is not part of a valid output and must
    not be emitted. Both are final.
    """

    def __init__(self, compiled: CompiledConstraint, vocab_width: int):
        self.compiled = compiled
        self.vocab_width = int(vocab_width)
        self._llt = compiled.grammar.ll_tokenizer
        self._m = compiled.grammar.new_matcher()
        self._words = (self._llt.vocab_size + 31) // 32  # the bitmask width llguidance fills
        marker = compiled.spec.activate_after
        self._marker = marker.encode("utf-8") if marker else b""
        self._tail = b""  # the last generated bytes, while waiting for the marker
        self._leading = 0  # whitespace-only tokens let through after the marker
        self._ws_ids, self._ws_bits = _whitespace_tokens(self._llt) if self._marker else (frozenset(), None)
        self.active = not self._marker
        self.error: str | None = None
        self.rejected = False
        self.consumed = 0  # tokens matched against the grammar

    @property
    def done(self) -> bool:
        return self.active and self.error is None and self._m.is_stopped()

    def is_accepting(self) -> bool:
        """Whether the output so far is a complete match (EOS is allowed now)."""
        return self.active and self.error is None and self._m.is_accepting()

    def is_stopped(self) -> bool:
        """Whether nothing but EOS may follow (the grammar is complete, or failed)."""
        return self.error is not None or (self.active and self._m.is_stopped())

    @property
    def needs_mask(self) -> bool:
        return self.active and self.error is None

    def advance(self, token_id: int) -> None:
        """Account for one generated token."""
        if self.error is not None:  # sampled without a valid mask: never part of the output
            self.rejected = True
            return
        if not self.active:
            self._watch(token_id)
            return
        if self._free_whitespace() and token_id in self._ws_ids:
            self._leading += 1
            return
        if self._m.try_consume_tokens([int(token_id)]) == 1:
            self.consumed += 1
            return
        # refused: where nothing could have followed (a speculative check samples a position past
        # a dead end freely), it fails as a plain step's mask would have, with the same words
        failure = self._next_bits(np.zeros(self._words, dtype=np.int32))
        if failure is None:
            self._m.consume_token(int(token_id))  # fails, and says why
            failure = f"token {token_id} does not continue the {self._label}: {_one_line(self._m.get_error())}"
        self._fail(failure, rejected=True)

    def _watch(self, token_id: int) -> None:
        """Before activation: look for the marker in the generated bytes."""
        text = self._tail + self._llt.decode_bytes([int(token_id)])
        at = text.find(self._marker)
        if at < 0:
            keep = len(self._marker) - 1
            self._tail = text[len(text) - keep:] if keep else b""
            return
        self.active, self._tail = True, b""
        rest = text[at + len(self._marker):].lstrip()  # whitespace after the marker stays free
        if rest:
            tokens = self._llt.tokenize_bytes(rest)
            if self._m.consume_tokens(tokens):
                self.consumed += len(tokens)
            else:
                self._fail(f"the text after {self.compiled.spec.activate_after!r} does not start "
                           f"a valid {self._label}", rejected=True)

    def _free_whitespace(self) -> bool:
        """Whether a whitespace-only token may still pass between the marker and the output."""
        return bool(self._marker) and self.consumed == 0 and self._leading < MAX_LEADING_WHITESPACE

    @property
    def _label(self) -> str:
        return _LABELS[self.compiled.spec.kind]

    def _fail(self, message: str, rejected: bool = False) -> None:
        self.error = f"structured output failed: {message}"
        self.rejected = self.rejected or rejected

    def fill_bitmask(self, row: np.ndarray) -> bool:
        """Write the allowed-next-token bits into ``row`` (int32, ``ceil(vocab_width / 32)``
        words; bits past the tokenizer's vocabulary stay 0). False, and an error set, when no
        token is allowed: a dead end."""
        failure = self._next_bits(row)
        if failure is not None:
            self._fail(failure)
        return failure is None

    def _next_bits(self, row: np.ndarray) -> str | None:
        """Write the allowed-next-token bits into ``row``; why none is allowed, if none is."""
        self._grammar_bits(row)
        if self._free_whitespace():
            n = min(self._ws_bits.shape[0], row.shape[0])
            row[:n] |= self._ws_bits[:n]
        _clear_tail_bits(row, self.vocab_width)
        if self._m.is_error():
            return _one_line(self._m.get_error())
        if not row.any():
            return f"the {self._label} allows no next token after {self.consumed} tokens (a dead end)"
        return None

    def _grammar_bits(self, row: np.ndarray) -> None:
        row[:] = 0
        if self._words == row.shape[0]:
            self._m.unsafe_compute_mask_ptr(row.ctypes.data, row.nbytes)
        else:
            full = np.zeros(self._words, dtype=np.int32)
            self._m.unsafe_compute_mask_ptr(full.ctypes.data, full.nbytes)
            n = min(self._words, row.shape[0])
            row[:n] = full[:n]

    @property
    def can_draft(self) -> bool:
        """Whether :meth:`draft_bitmasks` applies: the grammar is active, has not failed, and no
        free whitespace after an activation marker is pending (speculative decoding)."""
        return self.active and self.error is None and not self.rejected and not self._free_whitespace()

    def draft_bitmasks(self, tokens: Sequence[int], out: np.ndarray) -> None:
        """For a speculative pass over ``tokens`` (the pending token, then a draft): ``out[j]``
        (packed like :meth:`fill_bitmask`) gets the tokens allowed after ``tokens[:j + 1]``, for
        each ``j`` while the grammar takes the tokens. Past the first token it refuses, or a
        dead end, every token is allowed: the check never gets there (the mask before the
        refused token rules it out, so the draft stops being accepted at it). The matcher is
        left as it was; the engine then advances it with each emitted token, as without drafts."""
        consumed = 0
        for j, token in enumerate(tokens):
            if self._m.try_consume_tokens([int(token)]) != 1:
                break
            consumed += 1
            self._grammar_bits(out[j])
            _clear_tail_bits(out[j], self.vocab_width)
            if not out[j].any():
                break
        else:
            j = len(tokens)
        out[j:] = -1
        for row in out[j:]:
            _clear_tail_bits(row, self.vocab_width)
        if consumed:
            self._m.rollback(consumed)

    def mask(self) -> mx.array | None:
        """The (vocab_width,) bool mask of the tokens allowed next; None while inactive."""
        masks = constraint_masks([self], self.vocab_width)
        return None if masks is None else masks[0]


def _clear_tail_bits(row: np.ndarray, width: int) -> None:
    """Zero every bit at or past ``width`` (tokens the logits row does not have)."""
    full, extra = divmod(width, 32)
    if extra:
        row[full] &= np.int32((1 << extra) - 1)
        full += 1
    row[full:] = 0


def constraint_masks(matchers: Sequence[Matcher | None], vocab_width: int) -> list[mx.array | None] | None:
    """The next-token masks of a batch's rows (None for a row that is free this step), or None
    when no row has one. One packed numpy buffer, one ``mx.array``, unpacked lazily with mx ops."""
    rows = [i for i, m in enumerate(matchers) if m is not None and m.needs_mask]
    if not rows:
        return None
    words = (vocab_width + 31) // 32
    packed = np.zeros((len(rows), words), dtype=np.int32)
    ok = [matchers[i].fill_bitmask(packed[j]) for j, i in enumerate(rows)]
    if not any(ok):
        return None
    unpacked = unpack_bits(packed, vocab_width)
    out: list[mx.array | None] = [None] * len(matchers)
    for j, i in enumerate(rows):
        if ok[j]:  # a dead end samples freely: its token is discarded (``rejected``)
            out[i] = unpacked[j]
    return out


def draft_masks(matchers: Sequence[Matcher | None], rows: Sequence[Sequence[int]],
                vocab_width: int) -> list[mx.array | None]:
    """For a speculative pass over ``rows`` (each its pending token and a draft): each
    constrained row's (L, vocab_width) masks, position by position (:meth:`Matcher.draft_bitmasks`);
    None for a free row."""
    words = (vocab_width + 31) // 32
    out: list[mx.array | None] = [None] * len(rows)
    for i, (matcher, row) in enumerate(zip(matchers, rows)):
        if matcher is not None:
            packed = np.zeros((len(row), words), dtype=np.int32)
            matcher.draft_bitmasks(row, packed)
            out[i] = unpack_bits(packed, vocab_width)
    return out


def unpack_bits(packed: np.ndarray, vocab_width: int) -> mx.array:
    """(N, words) int32 bit rows -> (N, vocab_width) bool, unpacked on the device."""
    n, words = packed.shape
    bits = mx.right_shift(mx.array(packed.view(np.uint32))[:, :, None], mx.arange(32, dtype=mx.uint32))
    return (bits & 1).reshape(n, words * 32)[:, :vocab_width].astype(mx.bool_)


def advance_all(matchers: Sequence[Matcher | None], tokens: Sequence[int]) -> None:
    """Advance each row's matcher with the token that row generated."""
    for matcher, token in zip(matchers, tokens):
        if matcher is not None:
            matcher.advance(token)
