"""The qualify scorecard: its checks and figures, the request budget, and the text for people."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

CHECKS = ("loads", "chat_template", "deterministic", "tool_call", "json_mode", "speed")


@dataclass(frozen=True)
class Budget:
    """max_tokens of each request: enough to judge, short enough for a CPU."""

    determinism: int = 24
    call: int = 64  # the forcing grammar ends the call when it closes, well before this
    answer: int = 32
    json: int = 96  # the object must close within it
    speed: int = 48


DEFAULT_BUDGET = Budget()


@dataclass
class Check:
    name: str
    status: str  # pass | fail | skip
    detail: str
    seconds: float | None = None


@dataclass
class Scorecard:
    model: str
    target: str  # "in-process" or the server's URL
    checks: list[Check] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return all(c.status != "fail" for c in self.checks)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == "fail"]

    def check(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)

    def as_dict(self) -> dict:
        return {"model": self.model, "target": self.target, "passed": self.passed,
                "checks": [asdict(c) for c in self.checks], "metrics": self.metrics}  # fmt: skip


METRICS = ("load_s", "ttft_s", "decode_tok_s", "peak_memory_bytes", "tool_call_parser")


def new_card(name: str, target: str) -> Scorecard:
    return Scorecard(name, target, metrics={key: None for key in METRICS})


def scorecard_text(card: Scorecard) -> str:
    """The scorecard for people: one line per check, then the figures."""
    where = "in process" if card.target == "in-process" else card.target
    lines = [f"{card.model} ({where}): {'qualifies' if card.passed else 'DOES NOT QUALIFY'}"]
    width = max(len(c.name) for c in card.checks) if card.checks else 10
    for c in card.checks:
        mark = {"pass": "pass", "fail": "FAIL", "skip": "skip"}[c.status]
        lines.append(f"  {c.name.replace('_', ' '):<{width}}  {mark}  {c.detail}")
    m = card.metrics
    figures = [
        ("load", f"{m['load_s']:.2f} s" if m.get("load_s") is not None else None),
        ("TTFT", f"{m['ttft_s'] * 1000:.0f} ms" if m.get("ttft_s") is not None else None),
        ("decode", f"{m['decode_tok_s']:.1f} tok/s" if m.get("decode_tok_s") is not None else None),
        ("peak memory", _bytes(m.get("peak_memory_bytes"))),
        ("tool calls", m.get("tool_call_parser")),
    ]
    shown = [f"{label} {value}" for label, value in figures if value]
    if shown:
        lines.append("  " + "; ".join(shown))
    return "\n".join(lines)


def _bytes(n: int | None) -> str | None:
    if not n:
        return None
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} TB"
