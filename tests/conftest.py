"""Shared test settings: one persistent cache for real model weights across runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def test_cache_home() -> Path:
    """Where tests keep fetched wheels and imported models ($MLXCTL_TEST_CACHE overrides)."""
    return Path(os.environ.get("MLXCTL_TEST_CACHE", Path.home() / ".cache" / "mlxctl-test"))


@pytest.fixture(scope="session")
def model_home() -> Path:
    home = test_cache_home()
    home.mkdir(parents=True, exist_ok=True)
    return home
