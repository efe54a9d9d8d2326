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


@pytest.fixture(scope="session")
def smollm2(model_home):
    """The resolved default model (SmolLM2-135M-Instruct from its PyPI wheel) in the test cache."""
    from mlxctl.models.resolve import resolve_model
    from mlxctl.models.store import ModelStore

    return resolve_model(None, store=ModelStore(model_home))


@pytest.fixture(scope="session")
def smollm2_engine(smollm2):
    """One engine on the real SmolLM2, shared by every test that needs it."""
    from mlxctl.engine.engine import Engine
    from mlxctl.models.loader import load_model

    engine = Engine(lambda: load_model(smollm2.path)).start()
    yield engine
    engine.shutdown()
