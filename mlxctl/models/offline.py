"""Whether the user asked mlxctl (or the Hugging Face libraries) to stay off the network."""

from __future__ import annotations

import os

_TRUE = {"1", "true", "yes", "on"}


def env_flag(name: str) -> bool:
    """True when environment variable ``name`` is set to 1/true/yes/on."""
    return os.environ.get(name, "").strip().lower() in _TRUE


def offline(*also: str) -> bool:
    """True when MLXCTL_OFFLINE (or any of the variables named in ``also``) is set."""
    return any(env_flag(name) for name in ("MLXCTL_OFFLINE", *also))
