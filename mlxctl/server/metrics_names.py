"""The names /metrics exports its series under: ours (``mlxctl:``), vLLM's (``vllm:``) or both
(``serve --metrics-names``), so that vLLM's Grafana dashboards work unchanged.

A :class:`Series` is one figure exported under every name the chosen naming gives it: recording
into it records into each. A series vLLM has no name for keeps its ``mlxctl:`` name whatever the
naming, so ``vllm`` loses nothing. vLLM labels its series ``model_name`` and ``engine`` (the
engine-core index, always ``"0"`` here: one engine per model).
"""

from __future__ import annotations

from dataclasses import dataclass

NAMINGS = ("mlxctl", "vllm", "both")
MLXCTL_PREFIX, VLLM_PREFIX = "mlxctl:", "vllm:"
VLLM_LABELS = (("engine", "0"),)  # vLLM's labels beside model_name (and finished_reason)


@dataclass(frozen=True)
class Name:
    """One name a series is exported under, and the constant labels that go with it."""

    full: str
    labels: tuple[tuple[str, str], ...] = ()


def names_for(naming: str, ours: str | None, vllm: tuple[str, ...]) -> list[Name]:
    """The names a series with our name ``ours`` (None: vLLM's only) and vLLM's ``vllm`` gets."""
    if naming not in NAMINGS:
        raise ValueError(f"metrics naming must be one of {', '.join(NAMINGS)}, got {naming!r}")
    want_ours = naming in ("mlxctl", "both") or not vllm
    names = [Name(MLXCTL_PREFIX + ours)] if ours is not None and want_ours else []
    if naming in ("vllm", "both"):
        names += [Name(VLLM_PREFIX + name, VLLM_LABELS) for name in vllm]
    return names


class Series:
    """The prometheus_client metrics of one figure, one per name; ``of`` picks a model's children."""

    def __init__(self, kind, names: list[Name], doc: str, labels: tuple[str, ...], per_model: bool,
                 registry, **kwargs):
        self.per_model = per_model
        base = ("model_name",) if per_model else ()
        self.metrics = [(kind(name.full, doc, (*base, *labels, *(k for k, _ in name.labels)), registry=registry,
                              **kwargs), tuple(v for _, v in name.labels)) for name in names]

    def of(self, model: str | None = None, *values: str) -> "Children":
        """The children for ``model`` (a per-model series) and the values of its own labels."""
        head = (model,) if self.per_model else ()
        labels = [(*head, *values, *const) for _, const in self.metrics]
        return Children([metric.labels(*these) if these else metric
                         for (metric, _), these in zip(self.metrics, labels)])


class Children:
    """The same figure under each of its names: every call goes to all of them."""

    def __init__(self, children: list):
        self.children = children

    def inc(self, amount: float = 1) -> None:
        for child in self.children:
            child.inc(amount)

    def set(self, value: float) -> None:
        for child in self.children:
            child.set(value)

    def observe(self, value: float) -> None:
        for child in self.children:
            child.observe(value)
