"""Chained checks: a lone request copying a long stretch has its next check queued before the
one before is read (engine/speculative_step.py runs one check at a time otherwise).
``MLXCTL_CHAIN_CHECKS=1`` (``SpeculationConfig.chain``) turns them on; docs/speculative.md says
where they pay and where they do not.
"""

from __future__ import annotations

from typing import Any

from mlxctl.engine.speculative_undo import can_roll_back, cut, must_trim

MAX_CHAIN = 16  # checks one step queues ahead of reading them, at most (chain)


def chains(engine: Any, batch: Any, req: Any, draft: list[int]) -> bool:
    """Whether this check may be followed by the next before it is read (:func:`chain`): a
    lone request without a grammar, drafting by prompt lookup, on cache layers that a pass only
    appends to (:func:`_all_chainable`: a chunked-attention cache, llama4's, drops its front at the start
    of a pass by the offset it sees, which a queued check would make too large)."""
    return bool(draft) and engine.spec_chain and not batch.batched and len(batch) == 1 \
        and req.constraint is None and hasattr(req.proposer, "following") \
        and _all_chainable(batch.caches)


def _all_chainable(caches: list[Any]) -> bool:
    """Whether every layer is one whose forward changes nothing a cut cannot undo: plain and
    quantised KV, and sliding windows (cut only until they fill: ``can_roll_back``)."""
    from mlx_lm.models.cache import RotatingKVCache

    from mlxctl.engine.batch import PLAIN_KV

    kinds = (*PLAIN_KV, RotatingKVCache)
    return all(type(c) in kinds for c in caches)


def chain(engine: Any, batch: Any, req: Any, pending: tuple[int, Any], draft: list[int], ceiling: int,
          logits: Any) -> int:
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
    ``MAX_CHAIN`` checks; each check's tokens are delivered as they come. Returns the checks
    settled (what the policy divides the step's time by)."""
    import mlx.core as mx

    from mlxctl.engine.speculative import draw, settle
    from mlxctl.engine.speculative_step import as_tokens, settle_row
    from mlxctl.engine.streams import deliver_held

    drawn = draw(req.sampler, logits[0])
    mx.async_eval(drawn.tokens)
    for n in range(MAX_CHAIN):
        width = len(draft)
        nxt = _next_check(engine, batch, req, drawn.tokens, width, ceiling) \
            if n + 1 < MAX_CHAIN and req.speculation.streak else None
        tokens, samples = settle(req.sampler, drawn, draft)
        if nxt is not None and len(tokens) < width + 1:  # not taken whole: the next check was checking a guess
            must_trim(batch.caches, len(nxt[0]) + 1)
            engine.spec_chained["cut"] += 1
            nxt = None
        cut(batch, [len(tokens)], width + 1)
        alive = settle_row(engine, req, 0, width, ceiling, pending, tokens, samples,
                           after=0 if nxt is None else len(nxt[0]) + 1)
        deliver_held()
        pending = (tokens[-1], samples[len(tokens) - 1])
        if not alive:
            batch.keep([])
            return n + 1
        if nxt is None:
            break
        draft, drawn = nxt
        if drawn.states:  # the sampler goes on from past the next check's draws
            req.sampler.restore(drawn.states[-1])
    batch.tokens, batch.samples = as_tokens([pending[0]]), [pending[1]]
    batch.keep([0])
    return n + 1


def _next_check(engine: Any, batch: Any, req: Any, sampled: Any, width: int,
                ceiling: int) -> tuple[list[int], Any] | None:
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
    if not draft or not can_roll_back(batch.caches, len(draft) + 1):
        return None
    row = mx.concatenate([sampled[-1:], mx.array(draft, dtype=sampled.dtype)])
    drawn = draw(req.sampler, engine.runner.verify(batch, row[None])[0])
    mx.async_eval(drawn.tokens)
    engine.spec_chained["queued"] += 1
    return draft, drawn
