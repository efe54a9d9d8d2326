"""Running the CLI as users do: a fresh interpreter, real stdio."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_cli(*args: str, module: str = "mlxctl", env: dict[str, str] | None = None,
            **kwargs) -> subprocess.CompletedProcess[str]:
    """``python -m <module> ARGS`` from the repository root, output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO, env=clean_env(env), capture_output=True, text=True, timeout=60, **kwargs,
    )


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment without MLXCTL_DEBUG (tests decide on tracebacks), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k != "MLXCTL_DEBUG"}
    env["COLUMNS"] = "100"
    return {**env, **(extra or {})}
