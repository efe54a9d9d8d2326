"""Who a failed step is held against, so that one request that keeps failing cannot use up
everyone's retries.

A step runs many requests at once, so a failure cannot name its cause. The policy: a request
alone in flight when a step fails is blamed (its attempts grow). When several were in flight
and none of them was already under suspicion, nobody is blamed yet: they all become suspects
and are readmitted one suspect at a time (others still batch with it), each cleared as soon as
a step it is part of succeeds. A failure while a suspect is in flight is that suspect's.
"""

from __future__ import annotations

from typing import Sequence

from mlxctl.engine.request import Request


def blame(in_flight: Sequence[Request], suspects: set[str]) -> list[Request]:
    """The requests a failed step counts against; updates ``suspects`` in place."""
    if len(in_flight) == 1:
        return list(in_flight)
    under_suspicion = [r for r in in_flight if r.id in suspects]
    if under_suspicion:
        return under_suspicion
    suspects.update(r.id for r in in_flight)
    return []


def why_not_resumed(req: Request, max_retries: int) -> str | None:
    """Why a request in flight during a failed step ends with the error instead of going back
    to the queue; None when it is resumed. A matcher's state cannot be rebuilt from the tokens
    already sent, so structured-output requests are never resumed."""
    if req.constraint is not None:
        return "(structured-output requests are not resumed)"
    if req.attempts > max_retries:
        return f"after {req.attempts} failed attempts"
    return None
