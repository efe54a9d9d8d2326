"""Service-level objectives for goodput: ``ttft=0.5,tpot=0.05,e2e=10`` (seconds)."""

from __future__ import annotations

from dataclasses import dataclass

from mlxctl.errors import BadInputError

SLO_NAMES = ("ttft", "tpot", "e2e")


@dataclass(frozen=True)
class Slo:
    """Upper bounds in seconds; ``None`` means no bound on that metric."""

    ttft: float | None = None
    tpot: float | None = None
    e2e: float | None = None

    def as_dict(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in SLO_NAMES if getattr(self, name) is not None}

    def met_by(self, ttft: float | None, tpot: float | None, e2e: float | None) -> bool:
        """Whether one request's timings are within every bound (a missing timing passes)."""
        seen = {"ttft": ttft, "tpot": tpot, "e2e": e2e}
        return all(seen[name] is None or seen[name] <= bound for name, bound in self.as_dict().items())


def parse_slo(text: str) -> Slo:
    """``ttft=0.5,tpot=0.05,e2e=10`` -> :class:`Slo`; a bad item is a one-line error."""
    bounds: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, value = item.partition("=")
        name = name.strip().lower()
        if name not in SLO_NAMES:
            raise BadInputError(f"bad --slo item {item!r}", hint=f"use names {', '.join(SLO_NAMES)}, e.g. ttft=0.5,e2e=10")
        bounds[name] = _positive_seconds(item, value)
    if not bounds:
        raise BadInputError("--slo is empty", hint="e.g. --slo ttft=0.5,tpot=0.05,e2e=10")
    return Slo(**bounds)


def _positive_seconds(item: str, value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise BadInputError(f"bad --slo item {item!r}: {value.strip()!r} is not a number of seconds") from None
    if not seconds > 0:
        raise BadInputError(f"bad --slo item {item!r}: the bound must be above 0 seconds")
    return seconds
