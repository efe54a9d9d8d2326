"""Evaluated logprob arrays -> the plain values a stream event carries."""

from __future__ import annotations

from mlxctl.engine.events import TokenLogprob, TopLogprob
from mlxctl.engine.sampling import TokenLogprobs


def to_token_logprob(token_id: int, lp: TokenLogprobs) -> TokenLogprob:
    top: tuple[TopLogprob, ...] = ()
    if lp.top_ids is not None:
        pairs = zip(lp.top_ids.tolist(), lp.top_logprobs.tolist())
        top = tuple(TopLogprob(int(t), float(v)) for t, v in pairs)
    return TokenLogprob(token_id, float(lp.logprob.item()), top)
