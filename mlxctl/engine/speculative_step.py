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
engine/speculative_undo.py's ``lengths_honoured``) speculates one request at a time.

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

from mlxctl.engine.speculative_chain import chain, chains
from mlxctl.engine.speculative_undo import (batched_rollbackable, can_roll_back, cut, lengths_honoured,
                                            recurrent_states, replay)
from mlxctl.errors import BadInputError

log = logging.getLogger("mlxctl.engine")
MAX_ROWS = 8


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
    engine.spec_chained = {"queued": 0, "cut": 0}  # checks queued before the one before was read (speculative_chain)
    engine.spec_chain = spec.chain
    if engine.speculates and engine.spec_replay and spec.mixer_replay:
        from mlxctl.engine.mixer_replay import MixerTap

        tap = MixerTap(engine.runner.model)
        engine.mixer_tap = tap if tap.usable else None
    rows = spec.max_rows or max_rows()
    if engine.spec_replay and rows > 1 and not lengths_honoured(engine.runner):
        log.info("speculative decoding on this recurrent model: one request at a time (its recurrent layers "
                 "do not stop at a row's length, so a batch's rows cannot go back by different counts)")
        rows = 1
    engine.spec_rows = rows
    # growing drafts (ngram only; SpeculationConfig.grow): the backend bounds them
    engine.spec_grow = backend() if spec.mode == "ngram" and spec.grow is not False else ""
    engine.spec_grow_alone = spec.grow is None  # they grow only while a request is alone in the batch


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
        out["grow_drafts"] = ("alone" if engine.spec_grow_alone else True) if engine.spec_grow else False
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


def likely_rows(engine: Any) -> list[bool]:
    """For each row, whether it drafts and its tokens before the pending one make a draft likely
    (prompt lookup: they end in an n-gram seen before); all False where this step may not check
    (speculation off, too many rows, a batch that cannot go back, a request with images, a
    grammar that cannot draft). Looking for drafts needs the pending tokens on the host, which
    costs a plain step its overlap with the device's work, so text that does not repeat decodes
    as plain steps."""
    batch = engine.batch
    reqs = batch.requests
    if not engine.speculates or not 0 < len(batch) <= engine.spec_rows:
        return [False] * len(reqs)
    if batch.batched and not batched_rollbackable(batch.caches, engine.spec_replay):
        return [False] * len(reqs)
    if not batch.batched and not can_roll_back(batch.caches, 2, engine.spec_replay):
        return [False] * len(reqs)  # a full sliding window: no check could run, so none is looked for
    if not all((r.constraint is None or r.constraint.can_draft) and not r.images and not r.aborted for r in reqs):
        return [False] * len(reqs)
    # a reply with no room after its pending token drafts nothing: its last step stays a plain one
    return [bool(r.params.num_draft_tokens != 0 and r.speculation.drafting(r.num_generated)
                 and _room(r) > 0
                 and _proposer(engine, r).likely(r.prompt_tokens, r.generated)) for r in reqs]


def wanted(engine: Any) -> bool:
    """Whether this step checks drafts: some row's draft is likely (:func:`likely_rows`), and,
    unless the configuration says to check whenever one is (``measured=False``), the policy
    expects the check to pay (engine/speculative_policy.py)."""
    likely = likely_rows(engine)
    if not any(likely):
        return False
    return not engine.config.speculation.measured or \
        engine.spec_policy.choose(len(likely), *expected_tokens(engine, likely))


def expected_tokens(engine: Any, likely: list[bool]) -> tuple[float, int]:
    """The tokens a check of this step's batch is expected to emit: each row's pending one, and,
    for each row whose draft is likely, what its draft is expected to keep
    (``SpeculationStats.expect``), at most the draft's length; and the most a check of these
    rows could emit (every likely draft taken whole, at its full length: a draft cut short by a
    reply's end says nothing of what checks at this batch size can pay, and the policy lets a
    size that cannot pay wait longest)."""
    total, best = float(len(likely)), len(likely)
    for req, drafts in zip(engine.batch.requests, likely):
        if drafts:
            full = draft_length(engine, req)[0]
            k = _within_room(req, full)
            total += min(req.speculation.expect(k, req.num_generated), k)
            best += full if k else 0
    return total, best


def next_draft(engine: Any, req: Any) -> tuple[int, int]:
    """How long ``req``'s next draft may be (0: it does not draft now; at most the tokens its
    reply has room for after the pending one), and the ceiling a growing draft has (0: drafts do
    not grow)."""
    k, ceiling = draft_length(engine, req)
    return _within_room(req, k), ceiling


def _within_room(req: Any, k: int) -> int:
    """A draft of ``k`` tokens cut to the room ``req``'s reply has; 0 where it does not draft now."""
    return min(k, _room(req)) if req.speculation.drafting(req.num_generated) else 0


def _room(req: Any) -> int:
    """The tokens ``req`` may emit after its pending one."""
    return req.max_new_tokens - req.num_generated - 1


def draft_length(engine: Any, req: Any) -> tuple[int, int]:
    """``req``'s draft length (its own ``num_draft_tokens``, else the engine's, grown where
    drafts grow) whatever room its reply has left, and the growing ceiling (0: none). By default
    drafts grow while the request is alone in the batch and did not set its own length; with
    ``--grow-drafts`` (``grow=True``) always."""
    from mlxctl.engine.speculative import grow_ceiling

    asked = req.params.num_draft_tokens  # the request's own, else the engine's
    k = engine.config.speculation.num_draft_tokens if asked is None else asked
    grows = engine.spec_grow and k and (not engine.spec_grow_alone or (len(engine.batch) == 1 and asked is None))
    ceiling = grow_ceiling(k, engine.spec_grow) if grows else 0
    if ceiling:
        k = req.speculation.draft_length(k, ceiling)
    return k, ceiling


def _proposer(engine: Any, req: Any) -> Any:
    from mlxctl.engine.speculative import DraftProposer, NgramProposer

    if req.proposer is None:
        req.proposer = NgramProposer() if engine.draft is None else DraftProposer(engine.draft.model)
    return req.proposer


def speculate(engine: Any) -> tuple[int, float]:
    """One step: drafts proposed on the host, checked in one forward pass, the accepted tokens
    (and each row's next token) emitted, the rest cut from the caches. Returns the checks run
    (more than one where a lone request's checks chain; 0 where no row had a draft, and the
    step decoded plainly) and the seconds draft models spent catching up on tokens they had
    not seen (``DraftProposer.catch_up_s``: what the policy leaves out of a check's cost)."""
    import mlx.core as mx

    from mlxctl.engine.constraints import draft_masks
    from mlxctl.engine.speculative import accept_rows

    batch = engine.batch
    reqs, pendings, first = list(batch.requests), batch.tokens.tolist(), list(batch.samples)
    drafts, ceilings = [], []
    for req, pending in zip(reqs, pendings):
        k, ceiling = next_draft(engine, req)
        ceilings.append(ceiling)
        drafts.append(_proposer(engine, req).propose(req.prompt_tokens + req.generated + [pending], k) if k > 0 else [])
    catch_up = sum(req.proposer.catch_up_s for req, d in zip(reqs, drafts) if d)
    width = max(len(d) for d in drafts)
    if not width or (not batch.batched and not can_roll_back(batch.caches, width + 1, engine.spec_replay)):
        batch.keep(engine._emit(*batch.advance(*engine._decode())))  # nothing recurs; a window about to wrap
        return 0, catch_up
    saved = recurrent_states(batch.caches) if engine.spec_replay else None
    rows = [[p, *d, *[p] * (width - len(d))] for p, d in zip(pendings, drafts)]
    engine.spec_width = width + 1
    tap = engine.mixer_tap  # records each recurrent mixer's input, for an undo of those alone
    with tap.recording() if tap is not None else nullcontext():
        logits = engine.runner.verify(batch, rows)
    if saved is None and chains(engine, batch, reqs[0], drafts[0]):
        return chain(engine, batch, reqs[0], (pendings[0], first[0]), drafts[0], ceilings[0], logits), catch_up
    masks = None
    if any(r.constraint is not None for r in reqs):  # the forward runs while the host works out the masks
        mx.async_eval(logits)
        masks = draft_masks([r.constraint for r in reqs], rows, logits.shape[-1])
    checked = accept_rows([r.sampler for r in reqs], logits, [row[1:] for row in rows], masks)
    if saved is None:
        cut(batch, [len(tokens) for tokens, _ in checked], width + 1)
    else:
        replay(engine, batch, saved, [row[:len(tokens)] for row, (tokens, _) in zip(rows, checked)], width + 1)
    if tap is not None:
        tap.forget()  # a draft accepted whole replays nothing: its record goes too
    keep = [i for i, (req, (tokens, samples)) in enumerate(zip(reqs, checked))
            if settle_row(engine, req, i, len(drafts[i]), ceilings[i], (pendings[i], first[i]), tokens, samples)]
    batch.tokens = as_tokens([tokens[-1] for tokens, _ in checked])
    batch.samples = [samples[-1] for _, samples in checked]
    batch.keep(keep)
    return 1, catch_up


def settle_row(engine: Any, req: Any, row: int, drafted: int, ceiling: int, pending: tuple[int, Any],
               tokens: list[int], samples: list[Any], after: int = 0) -> bool:
    """A checked row: its draft of ``drafted`` tokens counted (a filled-out row's matches count
    as its next tokens, not as accepted drafts), then its pending token and the ``tokens`` the
    check kept but the last (the next pending one) emitted; False once one ends the request."""
    if drafted:
        accepted = min(len(tokens) - 1, drafted)
        # counted as of after this check's tokens (the pending one and those kept but the last):
        # a request relaxes towards hope, or waits out a pause, from where its check left it
        req.speculation.add(drafted, accepted, req.num_generated + len(tokens), ceiling)
        engine.speculation.add(drafted, accepted)
    return emit_row(engine, req, row, [pending, *zip(tokens[:-1], samples[:-1])], after)


def emit_row(engine: Any, req: Any, row: int, emitted: list, after: int = 0) -> bool:
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


def as_tokens(tokens: list[int]) -> Any:
    import mlx.core as mx

    return mx.array(tokens, dtype=mx.int32)
