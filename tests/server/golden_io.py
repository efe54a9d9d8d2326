"""Golden files: normalising what is inherently variable, comparing byte for byte, regenerating.

Only two things are substituted (everything else, the bytes of every SSE line included, is kept):

* generated ids: each distinct id becomes ``<prefix><sep>ID<n>``, numbered in order of first
  appearance in the transcript, so that one id used twice stays the same placeholder
  (``chatcmpl-``/``cmpl-`` + 32 hex; ``msg_``/``resp_``/``rs_``/``fc_`` + 24 or 32 hex;
  ``call_``/``toolu_`` + 24 alphanumerics);
* Unix timestamps: the number after ``"created":`` and ``"created_at":`` becomes ``TIME``.

``MLXCTL_REGEN_GOLDEN=1`` rewrites the files instead of comparing (see docs/development.md).
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

import pytest

GOLDEN_DIR = Path(__file__).parent / "golden"
_IDS = re.compile(r"\b(chatcmpl-|cmpl-)[0-9a-f]{32}\b|\b(msg_|resp_|rs_|fc_)(?:[0-9a-f]{32}|[0-9a-f]{24})\b"
                  r"|\b(call_|toolu_)[A-Za-z0-9]{24}\b")
_TIMES = re.compile(r'("created(?:_at)?": )\d+')


def normalise(text: str) -> str:
    seen: dict[str, str] = {}

    def placeholder(match: re.Match) -> str:
        prefix = next(g for g in match.groups() if g)
        return seen.setdefault(match.group(0), f"{prefix}ID{len(seen) + 1}")

    return _TIMES.sub(r"\1TIME", _IDS.sub(placeholder, text))


def regenerating() -> bool:
    return os.environ.get("MLXCTL_REGEN_GOLDEN") == "1"


def check_golden(name: str, actual: str) -> None:
    """Compare ``actual`` with golden/<name> (or write it, when regenerating); a unified diff on mismatch."""
    path = GOLDEN_DIR / name
    if regenerating():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(actual.encode())
        return
    if not path.exists():
        pytest.fail(f"no golden file {path}; run with MLXCTL_REGEN_GOLDEN=1 to write it")
    expected = path.read_bytes().decode()
    if actual != expected:
        diff = difflib.unified_diff(expected.splitlines(keepends=True), actual.splitlines(keepends=True),
                                    f"golden/{name}", "today's output")
        pytest.fail(f"{name} differs from its golden file (MLXCTL_REGEN_GOLDEN=1 rewrites it):\n" + "".join(diff),
                    pytrace=False)
