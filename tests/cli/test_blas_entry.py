"""The OpenBLAS re-exec happens in the real CLI process only, never under a test runner."""

from __future__ import annotations

import sys
import types

import pytest

from mlxctl.cli import blas


@pytest.mark.parametrize("argv0, main_spec, expected", [
    ("/usr/local/bin/mlxctl", None, True),  # the console script
    ("/repo/mlxctl/__main__.py", "mlxctl.__main__", True),  # python -m mlxctl
    ("/site-packages/pytest/__main__.py", "pytest.__main__", False),  # python -m pytest
    ("/usr/bin/pytest", None, False),
])
def test_only_the_cli_process_reexecutes(monkeypatch, argv0, main_spec, expected):
    main = types.ModuleType("__main__")
    main.__spec__ = types.SimpleNamespace(name=main_spec) if main_spec else None
    monkeypatch.setattr(sys, "argv", [argv0])
    monkeypatch.setitem(sys.modules, "__main__", main)
    assert blas._from_entry_point() is expected
