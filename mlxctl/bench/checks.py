"""Per-case contract checks: finish reason, required and forbidden regexes, minimum length."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Checks:
    """What a reply must satisfy; an empty field checks nothing."""

    finish_reason: tuple[str, ...] = ()
    require: tuple[re.Pattern[str], ...] = ()
    forbid: tuple[re.Pattern[str], ...] = ()
    min_chars: int = 0

    def describe(self) -> dict:
        return {
            "finish_reason": list(self.finish_reason),
            "require": [p.pattern for p in self.require],
            "forbid": [p.pattern for p in self.forbid],
            "min_chars": self.min_chars,
        }


def evaluate(checks: Checks, text: str, finish_reason: str | None) -> list[str]:
    """The reasons a reply fails its checks; empty when it passes."""
    failures = []
    if checks.finish_reason and finish_reason not in checks.finish_reason:
        failures.append(f"finish_reason {finish_reason!r}, expected {' or '.join(checks.finish_reason)}")
    failures += [f"missing /{p.pattern}/" for p in checks.require if not p.search(text)]
    failures += [f"forbidden /{p.pattern}/ matched" for p in checks.forbid if p.search(text)]
    if len(text) < checks.min_chars:
        failures.append(f"{len(text)} chars, expected at least {checks.min_chars}")
    return failures
