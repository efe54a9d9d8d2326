"""The CLI through its real entry point, against the test model cache."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.fixture
def cli(model_home, smollm2):
    """Run the real entry point in a subprocess against the test cache."""

    def run(*args, input=None, timeout=300, env=None):
        full_env = dict(os.environ, MLXCTL_HOME=str(model_home), **(env or {}))
        return subprocess.run([sys.executable, "-m", "mlxctl", *args], input=input, capture_output=True,
                              text=True, timeout=timeout, env=full_env)

    return run
