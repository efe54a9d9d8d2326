"""A decode step that checks drafts (engine/speculative.py), for one request or a batch.

Each row goes through the model with its pending token and a draft, all rows the same length
(a shorter draft is filled out with the row's pending token; what the model agrees with is
accepted like any draft token, the rest is cut). Rows accept different counts: the caches are
cut to the row that kept the most, and every other row is rolled right by what it kept less,
its left padding growing by as much (what mlx-lm's ``BatchKVCache.finalize`` does with right
padding), so all rows end at the same column again. The batch's host mirror of the padding is
updated with it.

Recurrent models (``engine.spec_replay``) go back by replaying: their recurrent state is
restored to before the check and brought forward over the kept tokens by their recurrent mixers
alone (engine/mixer_replay.py), or by the whole model. Where rows of a batch kept different
counts, each recurrent layer is told each row's length (mlx-lm's
``ArraysCache.prepare(lengths=...)``), whether its mixer alone runs again or the whole model
does, right-padded; a model whose recurrent layers ignore lengths (checked once at load:
:func:`_lengths_honoured`) speculates one request at a time.

Runs when every row may speculate (no images; a grammar once it is active and past any free
whitespace: each drafted position is then sampled under the mask the grammar gives after the
tokens before it, and the matcher, left where it was, is advanced with each emitted token, as a
plain step advances it) and one at least is drafting (a request pauses after drafts that keep
failing: ``SpeculationStats``), the batch is at most
``max_rows()`` rows (beyond that a step is compute-bound and a draft costs what it saves), and
its caches can drop what they were given: a lone request's plain caches (KV, quantised KV,
sliding windows until they wrap) or a batch's plain batched KV layers, and recurrent layers of
either by replaying.
"""

from __future__ import annotations

import logging
from contextlib import nullcontext
from typing import Any

from mlxctl.errors import BadInputError

log = logging.getLogger("mlxctl.engine")
MAX_ROWS = 8
MAX_CHAIN = 16  # checks one step queues ahead of reading them, at most (_chain)


def setup(engine: Any) -> None:
    """Once the model is loaded: the draft model (``--speculative draft``), whether this model
    speculates at all, and the largest batch that may."""
    from mlxctl.engine.wired import backend

    spec = engine.config.speculation
    if spec.mode == "draft":
        engine.draft = load_draft(spec, engine.model)
    engine.spec_replay = False  # set by _rollbackable for recurrent models
    engine.speculates = spec.enabled and _rollbackable(engine)
    engine.mixer_tap, engine.spec_mixer_replays = None, 0
    engine.spec_chained = {"queued": 0, "cut": 0}  # checks queued before the one before was read (_chain)
    engine.spec_chain = spec.chain
    if engine.speculates and engine.spec_replay and spec.mixer_replay:
        from mlxctl.engine.mixer_replay import MixerTap

        tap = MixerTap(engine.runner.model)
        engine.mixer_tap = tap if tap.usable else None
    rows = spec.max_rows or max_rows()
    if engine.spec_replay and rows > 1 and not _lengths_honoured(engine.runner):
        log.info("speculative decoding on this recurrent model: one request at a time (its recurrent layers "
                 "do not stop at a row's length, so a batch's rows cannot go back by different counts)")
        rows = 1
    engine.spec_rows = rows
    # growing drafts (SpeculationConfig allows them with ngram only): the backend bounds them
    engine.spec_grow = backend() if spec.grow else ""


def check_request(engine: Any, params: Any) -> None:
    """A request's own ``num_draft_tokens`` where the server does not speculate: a 400."""
    if params.num_draft_tokens and not engine.speculates:
        enabled = engine.config.speculation.enabled
        raise BadInputError("num_draft_tokens: this server does not speculate"
                            + (" with this model (its caches cannot drop a rejected draft)" if enabled
                               else " (start it with --speculative)"), param="num_draft_tokens")


def status(engine: Any) -> dict:
    """``engine.stats()["speculative"]``: the mode, whether it runs, and its totals."""
    spec = engine.config.speculation
    out = {"mode": spec.mode, "active": engine.speculates}
    if spec.enabled:
        out["num_draft_tokens"] = spec.num_draft_tokens
        out["grow_drafts"] = bool(engine.spec_grow)
        out["chain_checks"] = engine.spec_chain
        out["chained_checks"] = dict(engine.spec_chained)
        out.update(engine.speculation.as_dict())
        out["tokens_per_s"] = engine.spec_policy.snapshot()
        out["decode_steps"] = dict(engine.spec_policy.counts)
        if engine.spec_replay:  # rejected drafts undone by the recurrent mixers alone (else the whole model)
            out["mixer_replays"] = engine.spec_mixer_replays
    return out


def load_draft(spec: Any, target: Any) -> Any:
    """``--draft-model``, loaded, once its vocabulary is known to be the target's."""
    from mlxctl.engine.speculative import same_vocabulary
    from mlxctl.generation import model_loader

    draft = model_loader(spec.draft_model, spec.draft_dtype, None)()
    if not same_vocabulary(draft.tokenizer, target.tokenizer):
        raise BadInputError(f"the draft model {spec.draft_model} does not share the model's vocabulary "
                            "(its token ids would mean other text)", hint="draft with a model of the same family")
    return draft


def _rollbackable(engine: Any) -> bool:
    """Whether the model's (and the draft model's) cache layers can drop a rejected draft:
    plain and quantised KV, and sliding windows until they wrap (checked each step), by cutting
    them. A model with recurrent layers (mlx-lm's ``ArraysCache``: Qwen3-Next, Qwen3.5, Mamba,
    Nemotron-H...) goes back by replaying (``engine.spec_replay``)."""
    from mlx_lm.models.cache import ArraysCache, can_trim_prompt_cache, make_prompt_cache

    target = make_prompt_cache(engine.runner.model)
    drafts_ok = engine.draft is None or can_trim_prompt_cache(make_prompt_cache(engine.draft.model))
    if drafts_ok and can_trim_prompt_cache(target):
        return True
    if drafts_ok and all(c.is_trimmable() or type(c) is ArraysCache for c in target):
        engine.spec_replay = True
        log.info("speculative decoding on a recurrent model: a rejected draft is undone by restoring the "
                 "recurrent state and running the kept tokens again")
        return True
    log.warning("speculative decoding is off: this model's caches cannot roll back a rejected draft")
    return False


def max_rows() -> int:
    """The largest batch that may speculate: ``MAX_ROWS``, or one request on the CPU backend,
    where a batch's pass over several tokens a row costs several passes (a lone request gains
    1.7-2x: docs/benchmarks.md)."""
    import mlx.core as mx

    return 1 if mx.default_device() == mx.cpu else MAX_ROWS


def eligible(engine: Any) -> bool:
    """Whether this step checks drafts: some request drafts, and its tokens before the pending
    one make a draft likely (prompt lookup: they end in an n-gram seen before). Looking for
    drafts needs the pending tokens on the host, which costs a plain step its overlap with the
    device's work, so text that does not repeat decodes as plain steps."""
    batch = engine.batch
    if not engine.speculates or not 0 < len(batch) <= engine.spec_rows:
        return False
    if batch.batched and not _batched_rollbackable(batch.caches, engine.spec_replay):
        return False
    reqs = batch.requests
    return all((r.constraint is None or r.constraint.can_draft) and not r.images and not r.aborted for r in reqs) and \
        any(r.params.num_draft_tokens != 0 and r.speculation.drafting(r.num_generated)
            and _proposer(engine, r).likely(r.prompt_tokens, r.generated) for r in reqs)


def _proposer(engine: Any, req: Any) -> Any:
    from mlxctl.engine.speculative import DraftProposer, NgramProposer

    if req.proposer is None:
        req.proposer = NgramProposer() if engine.draft is None else DraftProposer(engine.draft.model)
    return req.proposer


def speculate(engine: Any) -> bool:
    """One step: drafts proposed on the host, checked in one forward pass, the accepted tokens
    (and each row's next token) emitted, the rest cut from the caches. Without any draft, a plain
    decode step (and False: nothing was checked)."""
    import mlx.core as mx

    from mlxctl.engine.constraints import draft_masks
    from mlxctl.engine.speculative import accept_rows, grow_ceiling

    batch = engine.batch
    reqs, pendings, first = list(batch.requests), batch.tokens.tolist(), list(batch.samples)
    drafts, ceilings = [], []
    for req, pending in zip(reqs, pendings):
        room = req.max_new_tokens - req.num_generated - 1  # tokens it may emit after the pending one
        asked = req.params.num_draft_tokens  # the request's own, else the engine's
        k = engine.config.speculation.num_draft_tokens if asked is None else asked
        ceiling = grow_ceiling(k, engine.spec_grow) if engine.spec_grow and k else 0
        if ceiling:
            k = req.speculation.draft_length(k, ceiling)
        ceilings.append(ceiling)
        k = min(k, room) if req.speculation.drafting(req.num_generated) else 0
        drafts.append(_proposer(engine, req).propose(req.prompt_tokens + req.generated + [pending], k) if k > 0 else [])
    width = max(len(d) for d in drafts)
    if not width or (not batch.batched and not _can_roll_back(batch.caches, width + 1, engine.spec_replay)):
        batch.keep(engine._emit(*batch.advance(*engine._decode())))  # nothing recurs; a window about to wrap
        return False
    saved = _recurrent_states(batch.caches) if engine.spec_replay else None
    rows = [[p, *d, *[p] * (width - len(d))] for p, d in zip(pendings, drafts)]
    tap = engine.mixer_tap  # records each recurrent mixer's input, for an undo of those alone
    with tap.recording() if tap is not None else nullcontext():
        logits = engine.runner.verify(batch, rows)
    if saved is None and _chains(engine, batch, reqs[0], drafts[0]):
        _chain(engine, batch, reqs[0], (pendings[0], first[0]), drafts[0], ceilings[0], logits)
        return True
    masks = None
    if any(r.constraint is not None for r in reqs):  # the forward runs while the host works out the masks
        mx.async_eval(logits)
        masks = draft_masks([r.constraint for r in reqs], rows, logits.shape[-1])
    checked = accept_rows([r.sampler for r in reqs], logits, [row[1:] for row in rows], masks)
    if saved is None:
        _cut(batch, [len(tokens) for tokens, _ in checked], width + 1)
    else:
        _replay(engine, batch, saved, [row[:len(tokens)] for row, (tokens, _) in zip(rows, checked)], width + 1)
    if tap is not None:
        tap.forget()  # a draft accepted whole replays nothing: its record goes too
    keep = []
    for i, (req, (tokens, samples)) in enumerate(zip(reqs, checked)):
        if drafts[i]:  # a filled-out row's matches count as its next tokens, not as accepted drafts
            accepted = min(len(tokens) - 1, len(drafts[i]))
            req.speculation.add(len(drafts[i]), accepted, req.num_generated, ceilings[i])
            engine.speculation.add(len(drafts[i]), accepted)
        if _emit_row(engine, req, i, [(pendings[i], first[i]), *zip(tokens[:-1], samples[:-1])]):
            keep.append(i)
    batch.tokens = _as_tokens([tokens[-1] for tokens, _ in checked])
    batch.samples = [samples[-1] for _, samples in checked]
    batch.keep(keep)
    return True


CHAINABLE = {"KVCache", "QuantizedKV", "RotatingKVCache"}  # cache layers whose forward changes nothing a cut cannot undo


def _chains(engine: Any, batch: Any, req: Any, draft: list[int]) -> bool:
    """Whether this check may be followed by the next before it is read (:func:`_chain`): a
    lone request without a grammar, drafting by prompt lookup, on cache layers that a pass only
    appends to (``CHAINABLE``: a chunked-attention cache, llama4's, drops its front at the start
    of a pass by the offset it sees, which a queued check would make too large)."""
    return bool(draft) and engine.spec_chain and not batch.batched and len(batch) == 1 \
        and req.constraint is None and hasattr(req.proposer, "following") \
        and all(type(c).__name__ in CHAINABLE for c in batch.caches)


def _chain(engine: Any, batch: Any, req: Any, pending: tuple[int, Any], draft: list[int], ceiling: int,
           logits: Any) -> None:
    """A lone request's checks, each queued before the one before it is read. A check's draft
    needs the tokens before it, so a check cannot overlap the host's work with the device's as
    plain steps do; but where a request copies a long stretch, drafts are taken whole one after
    another, and the next draft is then known before the check is read: what the copy goes on
    with (``NgramProposer.following``), after the token the check samples last, fed from the
    device unread. So while drafts keep being taken whole (from the second in a row: the
    request's ``streak``) the next check is queued, its positions sampled, before this one is
    read, and the host reads, cuts and emits while the device checks. Where this check turns out
    not taken whole, the next one's positions are cut unread and its draws forgotten (the
    sampler goes back to this check's emitted positions, as for any check). The chain stops
    where work waits to join, where a check is not taken whole, at the request's end, or after
    ``MAX_CHAIN`` checks; each check's tokens are delivered as they come."""
    import mlx.core as mx

    from mlxctl.engine.speculative import draw, settle
    from mlxctl.engine.streams import deliver_held

    drawn = draw(req.sampler, logits[0])
    mx.async_eval(drawn.tokens)
    for n in range(MAX_CHAIN):
        width = len(draft)
        nxt = _next_check(engine, batch, req, drawn.tokens, width, ceiling) \
            if n + 1 < MAX_CHAIN and req.speculation.streak else None
        tokens, samples = settle(req.sampler, drawn, draft)
        if nxt is not None and len(tokens) < width + 1:  # not taken whole: the next check was checking a guess
            trim(batch.caches, len(nxt[0]) + 1)
            engine.spec_chained["cut"] += 1
            nxt = None
        _cut(batch, [len(tokens)], width + 1)
        req.speculation.add(width, len(tokens) - 1, req.num_generated, ceiling)
        engine.speculation.add(width, len(tokens) - 1)
        alive = _emit_row(engine, req, 0, [pending, *zip(tokens[:-1], samples[:-1])],
                          after=0 if nxt is None else len(nxt[0]) + 1)
        deliver_held()
        pending = (tokens[-1], samples[len(tokens) - 1])
        if not alive:
            batch.keep([])
            return
        if nxt is None:
            break
        draft, drawn = nxt
        if drawn.states:  # the sampler goes on from past the next check's draws
            req.sampler.restore(drawn.states[-1])
    batch.tokens, batch.samples = _as_tokens([pending[0]]), [pending[1]]
    batch.keep([0])


def _next_check(engine: Any, batch: Any, req: Any, sampled: Any, width: int, ceiling: int) -> tuple[list[int], Any] | None:
    """The check after one of ``width`` draft tokens whose positions sampled ``sampled``
    (unread), queued as if that draft is taken whole, its positions sampled: its draft and its
    :class:`~mlxctl.engine.speculative.Drawn`, or None where there is nothing to check or no room."""
    import mlx.core as mx

    from mlxctl.engine.speculative import draw

    if engine.news() or req.aborted:
        return None
    asked = req.params.num_draft_tokens
    m = engine.config.speculation.num_draft_tokens if asked is None else asked
    if ceiling:  # growing: what SpeculationStats.add makes of a draft taken whole
        m = min(max(m, 2 * width), ceiling)
    m = min(m, req.max_new_tokens - req.num_generated - width - 2)  # this check's width + 1, and the token after
    draft = req.proposer.following(m)
    if not draft or not _can_roll_back(batch.caches, len(draft) + 1):
        return None
    row = mx.concatenate([sampled[-1:], mx.array(draft, dtype=sampled.dtype)])
    drawn = draw(req.sampler, engine.runner.verify(batch, row[None])[0])
    mx.async_eval(drawn.tokens)
    engine.spec_chained["queued"] += 1
    return draft, drawn


def _emit_row(engine: Any, req: Any, row: int, emitted: list, after: int = 0) -> bool:
    """Emit a row's tokens in order; False once one ends the request (the rest are dropped).
    ``after``: positions the cache holds beyond these (a chained check's, queued)."""
    for i, (token, sample) in enumerate(emitted):  # the cache holds all of these
        if req.constraint is not None:  # as a plain step does when it feeds the token in
            req.constraint.advance(token)
        engine._overhang = len(emitted) - 1 - i + after  # what an answer remembered at a stop here must not keep
        finished = engine._emit_one(req, token, sample, row)
        engine._overhang = 0
        if finished is not None:
            return False
    return True


def _cut(batch: Any, kept: list[int], written: int, caches: list[Any] | None = None) -> None:
    """Each row keeps ``kept[i]`` of the ``written`` positions just filled: cut the rest from
    ``caches`` (the batch's KV layers; all its layers by default)."""
    caches = batch.caches if caches is None else caches
    most = max(kept)
    trim(caches, written - most)
    if not batch.batched or most == min(kept):
        return
    import mlx.core as mx
    from mlx_lm.models.cache import dynamic_roll

    short = [most - k for k in kept]
    shift = mx.array(short)
    for c in caches:
        if hasattr(c, "roll"):  # --kv-bits: quantised parts (engine/kv/quantized.py)
            c.roll(shift)
            continue
        c.keys = dynamic_roll(c.keys, shift[:, None], axis=2)
        c.values = dynamic_roll(c.values, shift[:, None], axis=2)
        c.offset = c.offset - shift
        c.left_padding = c.left_padding + shift
    batch.left = [p + s for p, s in zip(batch.left, short)]


def _recurrent_states(caches: list[Any]) -> list[tuple[Any, list[Any]]]:
    """Each recurrent layer with its state arrays (the layers replace them, never change them)."""
    from mlx_lm.models.cache import ArraysCache

    return [(c, list(c.cache)) for c in caches if type(c) is ArraysCache]


def _replay(engine: Any, batch: Any, saved: list[tuple[Any, list[Any]]], kept: list[list[int]], written: int) -> None:
    """A recurrent model's rows kept ``kept[i]`` (the pending token and the accepted draft) of
    the ``written`` positions just checked. Recurrent state cannot be cut: it goes back to
    before the check and is brought forward over the kept positions, by running only the
    recurrent mixers again on what the check gave them, each row as far as its own count
    (engine/mixer_replay.py), the other layers cut as a plain model's are (:func:`_cut`). Where
    that cannot be done, the other layers are cut by all ``written`` and the kept tokens run
    through the whole model again (their logits are not needed): as one batch where every row
    kept as many, else by :func:`_refill`. A draft accepted whole by every row needs none of it."""
    counts = {len(k) for k in kept}
    if counts == {written}:
        return
    for layer, state in saved:
        layer.cache = state
    tap, lengths = engine.mixer_tap, [len(k) for k in kept]
    if tap is not None and tap.replay(lengths, written, [layer for layer, _ in saved]):
        engine.spec_mixer_replays += 1
        _cut(batch, lengths, written, [c for c in batch.caches if c.is_trimmable()])
        return
    trim([c for c in batch.caches if c.is_trimmable()], written)
    if len(counts) == 1:
        engine.runner.verify(batch, kept)
    else:
        _refill(engine, batch, kept)


def _refill(engine: Any, batch: Any, kept: list[list[int]]) -> None:
    """Rows that kept different counts run them again together through the whole model,
    right-padded to the longest: each recurrent layer is told each row's length, so its state
    (and its convolution's window) stops at the row's last kept token, and each KV layer's right
    padding is rolled to the left after, as a batched prompt tail's is (runner._tails_logits),
    so every row ends at the same column again; the batch's host mirror of the padding grows
    with it."""
    lengths = [len(k) for k in kept]
    pads = _right_padded(batch.caches, lengths, max(lengths))
    engine.runner.verify(batch, [k + [0] * pad for k, pad in zip(kept, pads)])  # logits never evaluated
    for c in batch.caches:
        c.finalize()
    batch.left = [p + s for p, s in zip(batch.left, pads)]


def _right_padded(caches: list[Any], lengths: list[int], width: int) -> list[int]:
    """Ready batched ``caches`` for rows of ``lengths`` real tokens right-padded to ``width``
    (recurrent layers stop at each row's length; KV layers roll their padding left at
    ``finalize``); the rows' padding."""
    from mlx_lm.models.cache import ArraysCache

    pads = [width - n for n in lengths]
    for c in caches:
        if type(c) is ArraysCache:
            c.prepare(lengths=lengths)
        else:
            c.prepare(right_padding=pads)
    return pads


def _lengths_honoured(runner: Any) -> bool:
    """Whether the model's recurrent layers stop at a row's length (mlx-lm's
    ``ArraysCache.prepare(lengths=...)``, which most of its recurrent mixers read; Mamba's does
    not): the recurrent state after three tokens must be the state after five told its length
    is three. Two short passes, once at load."""
    import mlx.core as mx
    from mlx_lm.models.cache import ArraysCache

    def states(tokens: list[int], length: int | None = None) -> list[Any]:
        cache = [type(c).merge([c]) for c in runner.new_cache()]
        if length is not None:
            _right_padded(cache, [length], len(tokens))
        runner.model(mx.array([tokens]), cache=cache)
        for c in cache:
            c.finalize()
        return [s for c in cache if type(c) is ArraysCache for s in c.cache if s is not None]

    try:
        short, long = states([1, 2, 3]), states([1, 2, 3, 4, 5], length=3)
        mx.eval(short, long)
        return len(short) == len(long) > 0 and all(
            a.shape == b.shape and mx.allclose(a, b, rtol=1e-2, atol=1e-3).item() for a, b in zip(short, long))
    except Exception:  # noqa: BLE001 - a model this probe cannot run speculates one request at a time
        log.debug("the recurrent length probe failed", exc_info=True)
        return False


def _batched_rollbackable(caches: list[Any], replay: bool) -> bool:
    """Whether a batch's caches can drop a rejected draft: plain batched KV layers by cutting,
    and (``replay``) recurrent layers by replaying."""
    from mlx_lm.models.cache import ArraysCache

    from mlxctl.engine.batch import BATCHED_KV

    return all(type(c) in BATCHED_KV or (replay and type(c) is ArraysCache) for c in caches)


def _can_roll_back(cache: list[Any], n: int, replay: bool = False) -> bool:
    """Whether ``n`` tokens written to a lone request's ``cache`` can all be cut again (a
    sliding window cuts nothing once it is full: mlx-lm trims a ``RotatingKVCache`` only while
    its offset is below its size; with ``replay``, recurrent layers go back by :func:`_replay`)."""
    from mlx_lm.models.cache import ArraysCache, RotatingKVCache

    return all((c.is_trimmable() or (replay and type(c) is ArraysCache))
               and (type(c) is not RotatingKVCache or c.offset + n < c.max_size) for c in cache)


def trim(cache: list[Any], n: int) -> bool:
    """Cut the last ``n`` tokens from every layer of ``cache``; False (nothing cut) where a
    layer cannot be cut (recurrent state)."""
    if n <= 0:
        return True
    from mlx_lm.models.cache import can_trim_prompt_cache, trim_prompt_cache

    if not can_trim_prompt_cache(cache):
        return False
    trim_prompt_cache(cache, n)
    return True


def _as_tokens(tokens: list[int]) -> Any:
    import mlx.core as mx

    return mx.array(tokens, dtype=mx.int32)


class Policy:
    """Whether drafts pay, per batch size, measured: moving averages of the tokens per second of
    speculative steps and of plain ones (steps that did nothing else). A size speculates until
    both are known, then while its speculative rate is at least the plain one; a size that
    stopped tries again after ``RECHECK`` plain steps (what the requests repeat changes), and
    after twice as many each time it is still behind, up to ``MAX_RECHECK``: where a check pass
    costs many plain steps (MLX's CUDA backend took about 78 ms for a 9-token check of a 1B
    model, against 3.5 ms a plain step: docs/benchmarks.md), rechecking every 32 steps had cost
    a third of the throughput. On a GPU a pass over a few tokens per row is meant to cost about
    one over one token, so drafts pay at every size up to ``MAX_ROWS``; on a CPU a batch is
    compute-bound and they do not."""

    RECHECK = 32
    MAX_RECHECK = 1024
    WEIGHT = 0.25  # of the newest step in the moving average

    def __init__(self) -> None:
        self.rates: dict[tuple[int, bool], float] = {}  # (rows, speculative) -> tokens/s
        self._plain_steps: dict[int, int] = {}  # rows -> plain steps since the last speculative one
        self._recheck: dict[int, int] = {}  # rows -> plain steps before the next check (doubles while behind)
        self._after_spec = False  # the plain step right after a speculative one only refills the pipeline
        self.counts = {"speculative": 0, "plain": 0}  # decode-only steps of each kind taken while speculating

    def choose(self, rows: int) -> bool:
        spec, plain = self.rates.get((rows, True)), self.rates.get((rows, False))
        if spec is None or (plain is not None and spec >= plain):
            self._recheck.pop(rows, None)
            return True
        if plain is None:
            return False
        waited, due = self._plain_steps.get(rows, 0) + 1, self._recheck.get(rows, self.RECHECK)
        if waited < due:
            self._plain_steps[rows] = waited
            return False
        self._plain_steps[rows] = 0
        self._recheck[rows] = min(2 * due, self.MAX_RECHECK)
        return True

    def record(self, rows: int, speculative: bool, tokens: int, seconds: float) -> None:
        """A step of ``rows`` rows that emitted ``tokens`` in ``seconds`` and ran no prompt work.
        A speculative step that found no draft counts as speculative: looking for drafts needs
        the pending tokens on the host, so such a step loses the pipeline's overlap, and text that
        seldom repeats must measure as what it costs."""
        self.counts["speculative" if speculative else "plain"] += 1
        refill, self._after_spec = self._after_spec and not speculative, speculative
        if refill or tokens <= 0 or seconds <= 0:
            return
        rate, key = tokens / seconds, (rows, speculative)
        old = self.rates.get(key)
        self.rates[key] = rate if old is None else old + self.WEIGHT * (rate - old)

    def snapshot(self) -> dict:
        """{batch size: {"speculative": tok/s, "plain": tok/s}} as measured so far."""
        out: dict = {}
        for (rows, speculative), rate in sorted(self.rates.items()):
            out.setdefault(str(rows), {})["speculative" if speculative else "plain"] = round(rate, 1)
        return out
